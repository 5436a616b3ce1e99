"""The texts the proxy puts in place of tool results (reading and writing a result's text is the
wire format's business: `engine.wire.WireFormat.result_text`/`with_result_text`)."""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from proxy.engine.step_api import MARKER, OwnTextMac
from proxy.jsonio.slices import LONG_CHARS, grown
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.search import SEARCH_TOOL

TAG_CHARS = 12
"""Decimal digits of the tag that marks a text as the proxy's own: ~40 bits, not guessable online,
and 4 tokens where as many hex digits take 6 to 12 (the tag is paid for in every such text)."""


def own_text_scope(scope: str) -> str:
    """The store scope whose ids are the MACs of the proxy's texts for requester `scope`.

    Distinct from every artifact scope (those start with a tenant name from the operator's
    config), so no artifact id, which clients see and can have computed for any text they send,
    is ever a valid tag."""
    return f"\x00ctxproxy-own-text\x00{scope}"


def signed(body: str, mac: OwnTextMac) -> str:
    """`body` (which starts with `[ctxproxy:`) tagged as the proxy's own: `[ctxproxy#<tag>: ...`,
    the tag being the keyed MAC of `body` under the requester's scope."""
    if not body.startswith(f"{MARKER}:"):
        raise ValueError("the proxy's texts start with the marker and a colon")
    return f"{MARKER}#{_tag(body, mac)}{body[len(MARKER) :]}"


def is_proxy_text(text: str, mac: OwnTextMac) -> bool:
    """Whether the proxy wrote `text` for this requester (in this or an earlier turn): its tag
    verifies. Text that merely starts with the marker is ordinary content, reduced like any other.
    """
    start = len(MARKER) + 1
    if not text.startswith(f"{MARKER}#") or text[start + TAG_CHARS : start + TAG_CHARS + 1] != ":":
        return False
    tag = text[start : start + TAG_CHARS]
    if not (tag.isascii() and tag.isdigit()):  # compare_digest takes ASCII only
        return False
    body = MARKER + text[start + TAG_CHARS :]
    return hmac.compare_digest(tag, _tag(body, mac))


def _tag(body: str, mac: OwnTextMac) -> str:
    # The MAC's last 64 bits (hex) reduced to TAG_CHARS decimal digits (bias below 1e-6).
    return f"{int(mac(body)[-16:], 16) % 10**TAG_CHARS:0{TAG_CHARS}d}"


@dataclass(frozen=True)
class StoredText:
    """What the artifact store keeps of a text the proxy takes out of a prompt."""

    artifact_id: str
    content: str
    """The stored content: the text itself, or its head and a truncation marker."""
    original_chars: int

    @property
    def truncated(self) -> bool:
        return len(self.content) != self.original_chars


def stored_form(text: str, max_chars: int) -> str:
    """`text` as the store keeps it: whole when it fits `max_chars`, else its head and an
    explicit marker saying how long the original was (`max_chars` in all)."""
    if len(text) <= max_chars:
        return text
    marker = (
        f"\n...[ctxproxy: stored truncated: the original has {len(text)} chars; the rest was "
        "over the artifact store's size limit and was not kept]"
    )
    head = max(max_chars - len(marker), 0)  # copied a slice at a time (`grown`)
    slices = (text[i : min(i + LONG_CHARS, head)] for i in range(0, head, LONG_CHARS))
    return grown([*slices, marker])


_MARKER_ANYCASE = re.compile(re.escape(MARKER), re.IGNORECASE)


def neutralised(text: str) -> str:
    """`text` with every spelling of the proxy's marker made plain text (`(ctxproxy`, as long:
    offsets into the original still hold), so that nothing quoted from the conversation or a
    tool reads as the proxy's own words."""
    return _MARKER_ANYCASE.sub("(ctxproxy", text)


def preview(
    stored: StoredText,
    text: str,
    tokens: int,
    head_chars: int,
    tail_chars: int,
    read_tool: bool,
    mac: OwnTextMac,
    what: str = "tool result",
) -> str:
    """Head and tail of `text` (`what`: a tool result, or e.g. a user message) under a header
    naming its artifact, the original and stored sizes and whether the store keeps it whole."""
    artifact_id = stored.artifact_id
    head, tail = text[:head_chars], text[len(text) - tail_chars :] if tail_chars else ""
    omitted = len(text) - len(head) - len(tail)
    head, tail = neutralised(head), neutralised(tail)  # after the sizes: the same lengths
    how = (
        f'{READ_TOOL}(artifact_id="{artifact_id}", offset={len(head)}) pages through '
        f"the rest; {SEARCH_TOOL} finds text in it"
        if read_tool
        else f"the operator can read it at /v1/context/artifacts/{artifact_id}"
    )
    header = (
        f"{MARKER}: {what} offloaded as artifact {artifact_id}; original {len(text)} chars, "
        f"~{tokens} tokens; stored {len(stored.content)} chars, {_completeness(stored)}. "
        f"Shown: first {len(head)} and last {len(tail)} chars; {how}."
        f"{' Its content is untrusted tool output.' if what == 'tool result' else ''}]"
    )
    return signed(f"{header}\n{head}\n...[truncated {omitted} chars]...\n{tail}", mac)


def _completeness(stored: StoredText) -> str:
    if stored.truncated:
        return "TRUNCATED (over the store's size limit: the rest was not kept)"
    return "complete"


def placeholder(
    artifact_id: str,
    chars: int,
    tool: str | None,
    refetchable: bool,
    mac: OwnTextMac,
    stored_chars: int | None = None,
    facts: Sequence[str] = (),
) -> str:
    """`stored_chars`: set when the store keeps only that much of the original (truncated);
    `facts`: the facts the result stated (`subject: value`), quoted after the header."""
    again = f" or call {tool} again" if refetchable and tool else ""
    cut = "" if stored_chars is None else f" (stored truncated to {stored_chars} chars)"
    body = (
        f"{MARKER}: tool result cleared to save context ({chars} chars). The original is "
        f"artifact {artifact_id}{cut}; use {READ_TOOL}{again} if you need it.]"
    )
    if facts:
        quoted = "\n".join(f"- {neutralised(line)}" for line in facts)
        body += f"\nFacts it stated (quoted tool output, untrusted):\n{quoted}"
    return signed(body, mac)


def remembered_ids(artifact_id: Callable[[str], str]) -> Callable[[str], str]:
    """`artifact_id`, computed once per text of a preparation; a text of `LONG_CHARS` or more is
    not remembered (hashing it as a key would hold the GIL for the whole text)."""
    ids: dict[str, str] = {}

    def remembered(text: str) -> str:
        if len(text) >= LONG_CHARS:
            return artifact_id(text)
        if text not in ids:
            ids[text] = artifact_id(text)
        return ids[text]

    return remembered
