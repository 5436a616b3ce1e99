"""The Anthropic event stream of the synthetic-tool loop: the `StreamFilter` that turns one or
more upstream rounds into the one message stream the client sees.

`message_start` goes out once (the first round's); text, thinking and client `tool_use` blocks
pass at once, renumbered so that block indices stay contiguous across rounds; a `tool_use` block
naming a synthetic tool is known from its `content_block_start` and held with its deltas, never
sent. Every round's `message_delta` and `message_stop` are held: `closing()` sends one
`message_delta` (the last round's stop reason, `usage` summed over the rounds) and one
`message_stop`. An event passed unchanged keeps its bytes (`event:` and `data:` as they came), so
a single round without synthetic calls reaches the client byte for byte.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import Any

from proxy.errors import ProxyError
from proxy.formats.common import add_usage, int_value
from proxy.formats.sse import SSEEvent, encode_event
from proxy.jsonio import dumps, loads
from proxy.synthetic.names import ToolNames

_BLOCK_EVENTS = ("content_block_start", "content_block_delta", "content_block_stop")


@dataclass
class _Block:
    """One content block of a round as it streams (kept for the round's assistant message)."""

    block: dict[str, Any]
    synthetic: bool
    partial_json: list[str] = field(default_factory=list)

    def add(self, delta: Any) -> None:
        if not isinstance(delta, dict):
            return
        kind = delta.get("type")
        if kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            self.partial_json.append(delta["partial_json"])
            return
        for key, field_name in (
            ("text_delta", "text"),
            ("thinking_delta", "thinking"),
            ("signature_delta", "signature"),
        ):
            value = delta.get(field_name)
            if kind == key and isinstance(value, str):
                self.block[field_name] = str(self.block.get(field_name) or "") + value

    def whole(self) -> dict[str, Any]:
        if self.block.get("type") == "tool_use" and self.partial_json:
            return {**self.block, "input": "".join(self.partial_json)}
        return self.block


@dataclass
class _Round:
    routes: dict[int, int | None] = field(default_factory=dict)
    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    stop_reason: Any = None
    delta_event: SSEEvent | None = None
    stop_event: SSEEvent | None = None

    def calls(self, synthetic: bool) -> list[dict[str, Any]]:
        return [
            b.whole()
            for b in self.blocks.values()
            if b.block.get("type") == "tool_use" and b.synthetic == synthetic
        ]


class StreamFilter:
    """Rewrites the events of every upstream round into the one stream the client sees."""

    def __init__(self, synthetic_names: Container[object] = ToolNames()) -> None:
        self._names = synthetic_names
        self.rounds = 0
        self.usage: dict[str, Any] | None = None
        self._round = _Round()
        self._next_index = 0
        self._loop_allowed = False
        self._rewritten = False

    def start_round(self, loop_allowed: bool) -> None:
        self._fold_usage()
        self.rounds += 1
        self._round = _Round()
        self._loop_allowed = loop_allowed

    def render(self, events: list[SSEEvent]) -> tuple[bytes, bool]:
        out: list[bytes] = []
        failed = False
        for event in events:
            try:
                payload = loads(event.data)
            except ProxyError:
                payload = None
            kind = payload.get("type") if isinstance(payload, dict) else None
            if not isinstance(payload, dict) or not isinstance(kind, str) or kind not in _HANDLED:
                out.append(encode_event(event))  # ping, unknown events, errors: as they came
                failed = failed or kind == "error" or event.event == b"error"
                continue
            forwarded = self._process(str(kind), payload, event)
            if forwarded is not None:
                out.append(forwarded)
        return b"".join(out), failed

    def _process(self, kind: str, payload: dict[str, Any], event: SSEEvent) -> bytes | None:
        state = self._round
        if kind == "message_start":
            message = payload.get("message")
            state.usage = add_usage(
                None, message.get("usage") if isinstance(message, dict) else None
            )
            return encode_event(event) if self.rounds <= 1 else None
        if kind == "message_delta":
            state.usage = {**(state.usage or {}), **_dict(payload.get("usage"))}
            delta = payload.get("delta")
            state.stop_reason = delta.get("stop_reason") if isinstance(delta, dict) else None
            state.delta_event = event
            return None
        if kind == "message_stop":
            state.stop_event = event
            return None
        return self._block_event(kind, payload, event)

    def _block_event(self, kind: str, payload: dict[str, Any], event: SSEEvent) -> bytes | None:
        state = self._round
        index = int_value(payload.get("index"))
        index = 0 if index is None else index
        if kind == "content_block_start" and index not in state.routes:
            block = payload.get("content_block")
            block = dict(block) if isinstance(block, dict) else {}
            synthetic = block.get("type") == "tool_use" and block.get("name") in self._names
            state.blocks[index] = _Block(block, synthetic)
            state.routes[index] = None if synthetic else self._next_index
            if not synthetic:
                self._next_index += 1
        route = state.routes.get(index, index)
        block_state = state.blocks.get(index)
        if kind == "content_block_delta" and block_state is not None:
            block_state.add(payload.get("delta"))
        if route is None:
            return None
        if route == index:
            return encode_event(event)
        self._rewritten = True
        return encode_event(SSEEvent(dumps({**payload, "index": route}), event.event))

    def pending_round(self) -> tuple[list[Any], list[Any]] | None:
        """(the round's other blocks, its synthetic calls) when it called only the proxy's tools
        and may loop; its end was held."""
        state = self._round
        own, client = state.calls(True), state.calls(False)
        if not own or client or not self._loop_allowed:
            return None
        others = [b.whole() for b in state.blocks.values() if b.block.get("type") != "tool_use"]
        return others, own

    def mixed_synthetic_calls(self) -> list[Any]:
        state = self._round
        own, client = state.calls(True), state.calls(False)
        return own if own and client else []

    def mixed_content(self) -> None:
        """None: the synthetic calls of a mixed round go back alone (as before)."""
        return None

    def missing_end(self) -> bool:
        """Whether the last round ended without its `message_stop`: the upstream cut the message
        short, and a `closing` made up by the proxy would present it as whole."""
        return self.rounds > 0 and self._round.stop_event is None

    def error(self, event: bytes) -> bytes:
        """The error event as it is (Anthropic events carry no sequence number)."""
        return event

    def closing(self) -> bytes:
        """One `message_delta` (summed usage; `end_turn` when only synthetic calls were left
        out) and one `message_stop`."""
        self._fold_usage()
        state = self._round
        out = b""
        only_synthetic = state.calls(True) and not state.calls(False)
        if state.delta_event is not None:
            if self.rounds <= 1 and not only_synthetic:
                out += encode_event(state.delta_event)
            else:
                out += self._summed_delta(state.delta_event, bool(only_synthetic))
        if state.stop_event is not None:
            out += encode_event(state.stop_event)
        return out

    def _summed_delta(self, event: SSEEvent, only_synthetic: bool) -> bytes:
        payload = loads(event.data)
        delta = dict(_dict(payload.get("delta")))
        if only_synthetic and delta.get("stop_reason") == "tool_use":
            delta["stop_reason"] = "end_turn"
        payload = {**payload, "delta": delta, "usage": self.usage or _dict(payload.get("usage"))}
        return encode_event(SSEEvent(dumps(payload), event.event))

    def _fold_usage(self) -> None:
        """Add the finished round's usage to the total (once per round)."""
        state = self._round
        if state.usage is not None:
            self.usage = add_usage(self.usage, state.usage)
            state.usage = None


_HANDLED = frozenset({"message_start", "message_delta", "message_stop", *_BLOCK_EVENTS})


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
