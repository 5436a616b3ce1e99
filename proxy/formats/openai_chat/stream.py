"""The OpenAI chat-completion stream of the synthetic-tool loop: the `StreamFilter` that turns one
or more upstream rounds into the one stream the client sees.

The filter is what keeps the synthetic read tools invisible while streaming: text passes at once,
a tool call's deltas are held only until its name shows whether it is synthetic, client calls go
out with contiguous indices, synthetic ones are accumulated silently, and later rounds are
rewritten to look like the continuation of the first (same id/created/model, no second role
delta, usage held back and summed). The client sees exactly one `data: [DONE]`.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import Any

from proxy.errors import ProxyError
from proxy.formats.common import add_usage
from proxy.formats.openai_chat.fields import function_of
from proxy.formats.sse import SSEEvent, encode_data, encode_event
from proxy.jsonio import dumps, loads
from proxy.synthetic.names import ToolNames

DONE = b"[DONE]"
_DONE_EVENT = encode_data(DONE)


@dataclass
class SyntheticCall:
    """A synthetic tool call assembled from its stream deltas."""

    id: str = ""
    name: str = ""
    arguments: str = ""

    def as_tool_call(self) -> dict[str, Any]:
        function = {"name": self.name, "arguments": self.arguments}
        return {"id": self.id, "type": "function", "function": function}


@dataclass
class _Choice:
    """Per choice of one round: where each upstream tool-call index goes."""

    routes: dict[int, int | None] = field(default_factory=dict)
    """Upstream index -> client index, or None for a synthetic call."""
    held: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    synthetic: dict[int, SyntheticCall] = field(default_factory=dict)
    client_calls: int = 0
    content: list[str] = field(default_factory=list)


_IDENTITY = ("id", "created", "model")


class StreamFilter:
    """Rewrites the chunks of every upstream round into the one stream the client sees.

    Call `start_round(loop_allowed)` before each round and `process(chunk)` for each parsed
    chunk; after the round, `pending_calls()` says whether it ended with synthetic calls only
    (and `loop_allowed`), in which case its finish chunk was held back and the caller executes
    them and starts the next round. `usage_chunk()` gives the one summed usage chunk.
    `synthetic_names`: what the proxy's tools are called in this request.
    """

    def __init__(self, synthetic_names: Container[object] = ToolNames()) -> None:
        self._synthetic_names = synthetic_names
        self.identity: dict[str, Any] | None = None
        self.rounds = 0
        self.usage: dict[str, Any] | None = None
        self._usage_template: dict[str, Any] | None = None
        self._choices: dict[int, _Choice] = {}
        self._loop_allowed = False
        self._held_finish = False

    def render(self, events: list[SSEEvent]) -> tuple[bytes, bool]:
        """What the client gets for these events of a round, and whether one was an error."""
        out: list[bytes] = []
        failed = False
        for event in events:
            if event.data == DONE:
                continue
            try:
                chunk = loads(event.data)
            except ProxyError:
                chunk = None
            if isinstance(chunk, dict) and ("choices" in chunk or "usage" in chunk):
                forwarded = self.process(chunk)
                if forwarded is not None:
                    out.append(encode_data(dumps(forwarded)))
                continue
            # Anything else (an error event above all) goes out as it came.
            out.append(encode_event(event))
            failed = failed or (isinstance(chunk, dict) and "error" in chunk)
        return b"".join(out), failed

    def start_round(self, loop_allowed: bool) -> None:
        self.rounds += 1
        self._choices = {}
        self._loop_allowed = loop_allowed
        self._held_finish = False

    def process(self, chunk: dict[str, Any]) -> dict[str, Any] | None:
        """The chunk to forward (rewritten in place), or None when none of it is for the client."""
        self._rewrite_identity(chunk)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = add_usage(self.usage, usage)
            self._usage_template = chunk
            chunk["usage"] = None
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            return None if isinstance(usage, dict) else chunk
        kept = [c for c in choices if not isinstance(c, dict) or self._choice(c)]
        if not kept:
            return None
        chunk["choices"] = kept
        return chunk

    def pending_calls(self) -> tuple[str | None, list[SyntheticCall]] | None:
        """(assistant text, synthetic calls) when the round's finish was held for execution."""
        if not self._held_finish:
            return None
        choice = next(iter(self._choices.values()))
        content = "".join(choice.content) or None
        return content, list(choice.synthetic.values())

    def pending_round(self) -> tuple[str | None, list[dict[str, Any]]] | None:
        """`pending_calls` with the calls as the tool calls of an assistant message."""
        pending = self.pending_calls()
        if pending is None:
            return None
        content, calls = pending
        return content, [call.as_tool_call() for call in calls]

    def mixed_synthetic_calls(self) -> list[dict[str, Any]]:
        """The synthetic calls of the round's only choice when it also made client calls."""
        if self._held_finish or len(self._choices) != 1:
            return []
        choice = next(iter(self._choices.values()))
        if not choice.client_calls:
            return []
        return [call.as_tool_call() for call in choice.synthetic.values()]

    def mixed_content(self) -> None:
        """None: the synthetic calls of a mixed round go back alone."""
        return None

    def missing_end(self) -> bool:
        """Never: `closing` ends the client's stream (usage chunk, done marker)."""
        return False

    def error(self, event: bytes) -> bytes:
        """The error chunk as it is (chat chunks carry no sequence number)."""
        return event

    def closing(self) -> bytes:
        """The end of the client stream: the summed usage chunk (if any round sent usage), then
        `data: [DONE]`."""
        usage = self.usage_chunk()
        return (encode_data(dumps(usage)) if usage is not None else b"") + _DONE_EVENT

    def usage_chunk(self) -> dict[str, Any] | None:
        """One chunk carrying the usage summed over rounds (None when no round sent usage)."""
        if self.usage is None or self._usage_template is None:
            return None
        chunk = {k: v for k, v in self._usage_template.items() if k != "usage"}
        chunk.update(self.identity or {})
        chunk["choices"] = []
        chunk["usage"] = self.usage
        return chunk

    def _rewrite_identity(self, chunk: dict[str, Any]) -> None:
        if self.identity is None:
            if "id" in chunk:
                self.identity = {k: chunk[k] for k in _IDENTITY if k in chunk}
            return
        for key, value in self.identity.items():
            if key in chunk:
                chunk[key] = value

    def _choice(self, choice: dict[str, Any]) -> bool:
        """Filter one choice in place; False when nothing of it is left to forward."""
        state = self._choices.setdefault(_int(choice.get("index")), _Choice())
        delta = choice.get("delta")
        touched = False
        if isinstance(delta, dict):
            touched = self._delta(state, delta)
        finish = choice.get("finish_reason")
        if finish is not None:
            touched |= self._finish(state, choice, delta)
        if not touched:
            return True
        delta = choice.get("delta")
        empty_delta = not isinstance(delta, dict) or all(v in (None, "") for v in delta.values())
        return not (
            empty_delta and choice.get("finish_reason") is None and choice.get("logprobs") is None
        )

    def _delta(self, state: _Choice, delta: dict[str, Any]) -> bool:
        touched = False
        if self.rounds > 1 and "role" in delta:
            del delta["role"]  # a later round continues the message the first one started
            touched = True
        if isinstance(delta.get("content"), str):
            state.content.append(delta["content"])
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            forwarded = self._tool_calls(state, calls)
            touched = True
            if forwarded:
                delta["tool_calls"] = forwarded
            else:
                del delta["tool_calls"]
        return touched

    def _tool_calls(self, state: _Choice, calls: list[Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for call in calls:
            if not isinstance(call, dict):
                continue
            index = _int(call.get("index"))
            if index not in state.routes:
                state.held.setdefault(index, []).append(call)
                name = function_of(call).get("name")
                if name is None:
                    continue
                out += self._route(state, index, synthetic=name in self._synthetic_names)
            elif state.routes[index] is None:
                _accumulate(state.synthetic.setdefault(index, SyntheticCall()), call)
            else:
                out.append({**call, "index": state.routes[index]})
        return out

    def _route(self, state: _Choice, index: int, *, synthetic: bool) -> list[dict[str, Any]]:
        held = state.held.pop(index, [])
        if synthetic:
            state.routes[index] = None
            accumulated = state.synthetic.setdefault(index, SyntheticCall())
            for call in held:
                _accumulate(accumulated, call)
            return []
        state.routes[index] = state.client_calls
        state.client_calls += 1
        return [{**call, "index": state.routes[index]} for call in held]

    def _finish(self, state: _Choice, choice: dict[str, Any], delta: Any) -> bool:
        flushed: list[dict[str, Any]] = []
        for index in list(state.held):  # a call whose name never came: the client's
            flushed += self._route(state, index, synthetic=False)
        if flushed:
            if not isinstance(delta, dict):
                delta = choice["delta"] = {}
            delta["tool_calls"] = delta.get("tool_calls", []) + flushed
        if not state.synthetic or state.client_calls:
            return bool(flushed)
        if self._loop_allowed and len(self._choices) == 1:
            self._held_finish = True
            choice["finish_reason"] = None
        else:
            choice["finish_reason"] = "stop"
        return True


def _accumulate(call: SyntheticCall, delta: dict[str, Any]) -> None:
    if isinstance(delta.get("id"), str):
        call.id = delta["id"]
    function = function_of(delta)
    if isinstance(function.get("name"), str) and not call.name:
        call.name = function["name"]
    if isinstance(function.get("arguments"), str):
        call.arguments += function["arguments"]


def _int(value: Any) -> int:
    # A boolean index counts as the integer it is (as it always did): routes stay as they were.
    return value if isinstance(value, int) else 0
