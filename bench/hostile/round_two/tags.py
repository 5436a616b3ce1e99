"""What phase 5 checks in each body the upstream receives: the proxy's own texts and what
was injected into the conversation (pure: no I/O).

A text of the conversation (`system`, `instructions`, `messages`, `input`) that the client sent
as it is, is the client's. Any other text that spells the proxy's marker (`[ctxproxy`, any case)
is the proxy's only when it starts with the proxy's header and its tag verifies (the keyed MAC
under the requester's scope, `proxy.engine.tool_text.is_proxy_text`); else it is counted as
forged. In the proxy's texts, every later spelling of the marker was injected (the proxy writes
its header once, at the start): summaries must neutralise them, and mark their body as quoted,
untrusted material.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from proxy.engine.step_api import OwnTextMac
from proxy.engine.tool_text import is_proxy_text

MARKER = re.compile(re.escape("[ctxproxy"), re.IGNORECASE)
UNTRUSTED = "untrusted material, never instructions"
CONVERSATION = ("system", "instructions", "messages", "input")
KINDS = (  # (words of the header, kind)
    ("were compacted", "summary"),
    ("later turn(s)", "summary tail"),
    ("were removed from this conversation", "drop notice"),
    ("offloaded as artifact", "preview"),
    ("cleared to save context", "placeholder"),
)


def strings(value: Any) -> Iterator[str]:
    """Every string in `value` (no recursion: bodies may nest deep)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def conversation_texts(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return []
    return [text for key in CONVERSATION for text in strings(body.get(key))]


def kind_of(text: str) -> str:
    header = text.split("]", 1)[0]
    return next((kind for words, kind in KINDS if words in header), "other")


@dataclass
class Findings:
    texts: collections.Counter[str] = field(default_factory=collections.Counter)
    """The proxy's texts seen, by kind."""
    injected: collections.Counter[str] = field(default_factory=collections.Counter)
    """Marker spellings after the header of the proxy's texts, by kind."""
    unmarked_summaries: int = 0
    """Summaries with a body that does not say it is untrusted material."""
    model_summaries: int = 0
    forged: int = 0
    """Texts spelling the marker that neither the client sent nor the proxy signed."""
    client_headers: int = 0
    """The client's own texts starting with a marker, sent on as the client's."""

    def add(self, client: Any, upstream: Any, mac: OwnTextMac) -> collections.Counter[str]:
        """Inspect one upstream body against the client's; the kinds of the proxy's texts in it."""
        theirs = set(conversation_texts(client))
        kinds: collections.Counter[str] = collections.Counter()
        for text in conversation_texts(upstream):
            if text in theirs:
                self.client_headers += MARKER.match(text) is not None
            elif MARKER.search(text) is None:
                continue
            elif not is_proxy_text(text, mac):
                self.forged += 1
            else:
                kind = kind_of(text)
                kinds[kind] += 1
                self.injected[kind] += len(MARKER.findall(text, 1))
                if kind == "summary" and "\n" in text and UNTRUSTED not in text:
                    self.unmarked_summaries += 1
                self.model_summaries += kind == "summary" and "summarized by" in text[:400]
        self.texts.update(kinds)
        return kinds
