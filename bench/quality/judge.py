"""Judging one prepared request: budget, tool-pair integrity, evidence reachability, prefix reuse.

Evidence is *reachable* when its exact string is in the prepared messages (`inline`), or in an
artifact that the prepared messages reference and that the synthetic read tool, offered in the
prepared `tools`, actually returns for the tenant's scope (`artifact`). Artifacts are read the way
the model would read them: page by page through `proxy.artifacts.read_tool.execute`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from bench.quality.text import Probe
from proxy.artifacts.store import ArtifactStore
from proxy.engine.step_api import MARKER
from proxy.formats.openai_chat.conversation import parse_conversation
from proxy.jsonio import dumps
from proxy.synthetic.base import CallContext, RoundBudget
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.registry import execute
from proxy.tokens.counters import REPLY_PRIMER, TokenCounter

ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")
MAX_ARTIFACTS_FOLLOWED = 4096
"""Enough for every artifact a 128k-token prompt names (64 left cleared results of long
sessions unread: evidence counted missing that the model could read)."""


@dataclass
class Result:
    """What one method produced for one request."""

    body: dict[str, Any] | None
    """The request that would go upstream; None when the method refused it."""
    store: ArtifactStore | None = None
    scope: str = ""
    max_page_chars: int = 20_000
    note: str = ""


@dataclass
class Outcome:
    """The judged result of one request."""

    tokens_before: int
    tokens_after: int | None
    allowance: int
    broken_pairs: int
    reach: list[str]
    """Per probe: "inline", "artifact" or "missing"."""
    stale: int
    """Probes whose current value is not visible inline but a superseded one is."""
    prefix_tokens: int = 0
    prompt_tokens: int = 0
    note: str = ""
    break_cause: str | None = None
    """Why the previous prompt is not a prefix of this one (None when it is)."""

    @property
    def refused(self) -> bool:
        return self.tokens_after is None

    @property
    def over(self) -> bool:
        return self.tokens_after is not None and self.tokens_after > self.allowance


def message_texts(message: Any) -> list[str]:
    """Every text of a message the model sees: content (string or text parts), call arguments."""
    if not isinstance(message, dict):
        return []
    out: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        out += [
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            out.append(function["arguments"])
    return out


def offers_read_tool(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    return isinstance(tools, list) and any(
        isinstance(t, dict) and (t.get("function") or {}).get("name") == READ_TOOL for t in tools
    )


class ArtifactReader:
    """Reads whole artifacts through the synthetic read tool, page by page (cached by id)."""

    def __init__(self, store: ArtifactStore, scope: str, max_page_chars: int) -> None:
        self._store = store
        self._scope = scope
        self._page = max_page_chars
        self._cache: dict[str, str | None] = {}

    async def text(self, artifact_id: str) -> str | None:
        """The artifact's text as read (plus its messages' texts when it is an archive)."""
        if artifact_id not in self._cache:
            text = await self._read(artifact_id)
            self._cache[artifact_id] = None if text is None else _searchable(text)
        return self._cache[artifact_id]

    async def _read(self, artifact_id: str) -> str | None:
        pages: list[str] = []
        offset: int | None = 0
        while offset is not None:
            args = {"artifact_id": artifact_id, "offset": offset, "max_chars": self._page}
            call = CallContext(self._store, self._scope, self._page, RoundBudget())
            read = await execute(READ_TOOL, args, call)
            answer = json.loads(read.text)
            if "error" in answer:
                return None
            pages.append(answer["content"])
            offset = answer["next_offset"]
        return "".join(pages)


def _searchable(text: str) -> str:
    """The artifact's text, plus the message texts when it is an archive of JSON lines."""
    decoded: list[str] = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                decoded += message_texts(json.loads(line))
            except ValueError:
                continue
    return "\n".join([text, *decoded])


async def artifact_texts(messages: list[Any], reader: ArtifactReader) -> list[str]:
    """Texts of every artifact referenced by the messages (and by those artifacts, transitively)."""
    queue = [i for m in messages for t in message_texts(m) for i in ARTIFACT_ID.findall(t)]
    seen: set[str] = set()
    texts: list[str] = []
    while queue and len(seen) < MAX_ARTIFACTS_FOLLOWED:
        artifact_id = queue.pop(0)
        if artifact_id in seen:
            continue
        seen.add(artifact_id)
        text = await reader.text(artifact_id)
        if text is not None:
            texts.append(text)
            queue += ARTIFACT_ID.findall(text)
    return texts


@dataclass
class Judge:
    """Judges the requests of one sequence (one scenario x method x budget)."""

    counter: TokenCounter
    allowance: int
    readers: dict[int, ArtifactReader] = field(default_factory=dict)
    _previous: list[_Element] | None = None
    _sizes: dict[int, _Element] = field(default_factory=dict)

    async def judge(self, original: dict[str, Any], result: Result, probes: list[Probe]) -> Outcome:
        before = self._tokens(original)
        body = result.body
        if body is None:
            return Outcome(
                before, None, self.allowance, 0, ["missing"] * len(probes), 0, note=result.note
            )
        messages = body.get("messages") or []
        inline = "\n".join(t for m in messages for t in message_texts(m))
        stored: list[str] = []
        if result.store is not None and offers_read_tool(body):
            stored = await artifact_texts(messages, self._reader(result))
        reach = [_reach(p, inline, stored) for p in probes]
        stale = sum(
            1
            for p, r in zip(probes, reach, strict=True)
            if r != "inline" and any(old in inline for old in p.superseded)
        )
        broken = self._broken(original, messages)
        prompt = self._prompt(body)
        first = self._previous is None
        prefix, cause = self._prefix(prompt)
        after = sum(e.tokens for e in prompt) + REPLY_PRIMER
        # The first forwarded prompt of a sequence has nothing to reuse: it is left out of the
        # cached-prefix share (prompt_tokens 0) rather than counted as a miss.
        return Outcome(
            before,
            after,
            self.allowance,
            broken,
            reach,
            stale,
            prefix,
            0 if first else after - REPLY_PRIMER,
            result.note,
            cause,
        )

    def _broken(self, original: dict[str, Any], messages: list[Any]) -> int:
        """Tool-pair problems in the prepared messages (the generated input has none)."""
        if messages is original.get("messages"):
            return 0
        return len(parse_conversation(messages).problems)

    def _reader(self, result: Result) -> ArtifactReader:
        assert result.store is not None
        key = id(result.store)
        if key not in self.readers:
            self.readers[key] = ArtifactReader(result.store, result.scope, result.max_page_chars)
        return self.readers[key]

    def _tokens(self, body: dict[str, Any]) -> int:
        return sum(e.tokens for e in self._prompt(body)) + REPLY_PRIMER

    def _message(self, message: Any) -> _Element:
        hit = self._sizes.get(id(message))
        if hit is None or hit.value is not message:
            hit = _Element(message, dumps(message), self.counter.count_message(message))
            self._sizes[id(message)] = hit  # keeps `message` alive, so its id is not reused
        return hit

    def _prompt(self, body: dict[str, Any]) -> list[_Element]:
        """The prompt as a provider caches it: the tools block first, then each message."""
        tools, choice = body.get("tools"), body.get("tool_choice")
        head = _Element(None, dumps([tools, choice]), self.counter.count_tools(tools, choice))
        return [head, *(self._message(m) for m in body.get("messages") or [])]

    def _prefix(self, prompt: list[_Element]) -> tuple[int, str | None]:
        """Tokens of the leading elements byte-identical to the previous forwarded prompt, and
        what broke the prefix when the previous prompt is not a prefix of this one."""
        previous, self._previous = self._previous, prompt
        if previous is None:
            return 0, None
        shared = 0
        for k, (a, b) in enumerate(zip(prompt, previous, strict=False)):
            if a.data != b.data:
                return shared, _cause(k, a)
            shared += a.tokens
        return shared, None if len(prompt) >= len(previous) else "messages removed at the end"


@dataclass(frozen=True)
class _Element:
    value: Any
    data: bytes
    tokens: int


def _cause(position: int, element: _Element) -> str:
    """Names the change at the first differing element of a prompt, by the proxy's marker text."""
    if position == 0:
        return "tools block changed"
    text = " ".join(message_texts(element.value))
    if text.startswith(MARKER):
        for needle, cause in _CAUSES:
            if needle in text[:200]:
                return cause
        return "other ctxproxy rewrite"
    return "messages removed before it"


_CAUSES = (
    ("earlier turn(s)", "drop_turns notice"),
    ("tool result cleared", "clear_tool_results"),
    ("tool result offloaded", "offload_tool_results"),
)


def _reach(probe: Probe, inline: str, stored: list[str]) -> str:
    if probe.evidence in inline:
        return "inline"
    if any(probe.evidence in text for text in stored):
        return "artifact"
    return "missing"
