"""The Responses event stream of the synthetic-tool loop: `ResponsesStream` turns one or more
upstream rounds into the one stream the client sees.

Events are routed by `output_index`. A message's events (text deltas above all) pass at once; a
`function_call` of the proxy's tools is never shown, nor are the `reasoning` items directly
before it: a reasoning item's events are held until the next item of the response shows whose it
is (shown before a client's item, hidden before a synthetic call). Later rounds continue the
first: their `response.created` / `response.in_progress` are dropped, output indices go on where
the previous round stopped, every event is numbered again (`sequence_number`), and the one final
`response.completed` carries the first round's creation time, the output items the client saw, and
the usage summed over the rounds. Its id is the last round's: with `store: true` that is the
response the provider keeps the whole exchange under (a client chaining `previous_response_id`
continues after the proxy's rounds, never from a call without its output), as in a JSON answer.
The Responses API sends no done marker, and neither does this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy.errors import ProxyError
from proxy.formats.common import add_usage
from proxy.formats.openai_responses.answers import (
    DEFAULT_NAMES,
    is_synthetic_call,
    synthetic_items,
)
from proxy.formats.openai_responses.errors import encode_event
from proxy.formats.openai_responses.fields import is_call, item_type
from proxy.formats.sse import SSEEvent
from proxy.formats.sse import encode_event as encode_raw
from proxy.jsonio import loads
from proxy.synthetic.names import ToolNames

_OPENING = frozenset({"response.created", "response.in_progress", "response.queued"})
_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_IDENTITY = ("created_at",)
_HIDDEN = -1


@dataclass
class _Round:
    loop_allowed: bool
    routes: dict[int, int] = field(default_factory=dict)
    """Upstream output index -> client output index, or `_HIDDEN` (held reasoning is absent)."""
    held: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    """Reasoning items whose owner is not known yet: their events, in order."""
    synthetic: dict[int, Any] = field(default_factory=dict)
    """Synthetic calls (upstream index -> the item as its last event showed it)."""
    client_calls: int = 0
    final_output: list[Any] | None = None
    """The upstream's whole output, from its final event."""
    output: list[Any] | None = None
    """The round's whole output, held back when the round is executed (it goes back upstream)."""


class ResponsesStream:
    """Rewrites the events of every upstream round into the one stream the client sees."""

    def __init__(self, synthetic_names: ToolNames = DEFAULT_NAMES) -> None:
        self._names = synthetic_names
        self.rounds = 0
        self.usage: dict[str, Any] | None = None
        self._identity: dict[str, Any] | None = None
        self._sequence = 0
        self._next_index = 0
        self._shown: list[Any] = []
        self._round = _Round(False)
        self._ended = False

    def start_round(self, loop_allowed: bool) -> None:
        self.rounds += 1
        self._round = _Round(loop_allowed)

    def render(self, events: list[SSEEvent]) -> tuple[bytes, bool]:
        out: list[bytes] = []
        failed = False
        for event in events:
            try:
                payload = loads(event.data)
            except ProxyError:
                payload = None
            if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
                out.append(encode_raw(event))
                continue
            failed = failed or payload["type"] == "error"
            out += [self._numbered(p) for p in self._route(payload)]
        return b"".join(out), failed

    def pending_round(self) -> tuple[list[Any], list[Any]] | None:
        """(the round's output, its synthetic calls) when it was held back for execution."""
        output = self._round.output
        if output is None:
            return None
        return output, [item for item in output if is_synthetic_call(item, self._names)]

    def mixed_synthetic_calls(self) -> list[Any]:
        """The synthetic calls of a round that also called client tools (never shown)."""
        state = self._round
        if state.output is not None or not state.client_calls:
            return []
        return list(state.synthetic.values())

    def mixed_content(self) -> list[Any] | None:
        """The synthetic calls of a mixed round with the reasoning items before each, from the
        round's final output (None without one: the calls go back alone)."""
        output = self._round.final_output
        return synthetic_items(output, self._names) if output is not None else None

    def closing(self) -> bytes:
        """Nothing: the final `response.completed` already went out (no done marker)."""
        return b""

    def missing_end(self) -> bool:
        """Whether no final event (`response.completed` / `.incomplete` / `.failed`) went out:
        the upstream's last round ended without one."""
        return not self._ended

    def error(self, event: bytes) -> bytes:
        """The proxy's `error` event numbered after the events the client got (its
        `sequence_number` goes on from theirs)."""
        for line in event.split(b"\n"):
            if line.startswith(b"data: "):
                try:
                    payload = loads(line[6:])
                except ProxyError:
                    return event
                if isinstance(payload, dict):
                    return self._numbered(payload)
        return event

    def _numbered(self, payload: dict[str, Any]) -> bytes:
        payload["sequence_number"] = self._sequence
        self._sequence += 1
        return encode_event(payload)

    def _route(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        kind = payload["type"]
        if kind in _OPENING:
            return self._opening(payload)
        if kind in _FINAL:
            return self._final(payload)
        if kind == "response.output_item.added":
            return self._added(payload)
        index = payload.get("output_index")
        if not isinstance(index, int) or index not in self._round.routes:
            return [payload]
        return self._item_event(payload, index)

    def _opening(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        response = payload.get("response")
        if self._identity is None and isinstance(response, dict):
            self._identity = {k: response[k] for k in _IDENTITY if k in response}
            return [payload]
        return [] if self.rounds > 1 else [payload]

    def _added(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        index, item = payload.get("output_index"), payload.get("item")
        state = self._round
        if not isinstance(index, int):
            return [payload]
        if item_type(item) == "reasoning":
            state.routes[index] = _HIDDEN
            state.held[index] = [payload]
            return []
        if is_synthetic_call(item, self._names):
            state.routes[index] = _HIDDEN
            state.synthetic[index] = item
            state.held.clear()  # the reasoning before a synthetic call is the proxy's too
            return []
        shown = self._flush_held()
        if is_call(item):
            state.client_calls += 1
        state.routes[index] = self._client_index()
        return [*shown, self._shown_event(payload, index)]

    def _item_event(self, payload: dict[str, Any], index: int) -> list[dict[str, Any]]:
        state = self._round
        done = payload["type"] == "response.output_item.done"
        if index in state.held:
            state.held[index].append(payload)
            return []
        if state.routes[index] == _HIDDEN:
            if done and index in state.synthetic:
                state.synthetic[index] = payload.get("item")
            return []
        return [self._shown_event(payload, index)]

    def _shown_event(self, payload: dict[str, Any], index: int) -> dict[str, Any]:
        payload["output_index"] = self._round.routes[index]
        if payload["type"] == "response.output_item.done":
            self._shown.append(payload.get("item"))
        return payload

    def _client_index(self) -> int:
        self._next_index += 1
        return self._next_index - 1

    def _flush_held(self) -> list[dict[str, Any]]:
        """The held reasoning items go out (the item after them is the client's)."""
        out: list[dict[str, Any]] = []
        state = self._round
        for index, events in state.held.items():
            state.routes[index] = self._client_index()
            out += [self._shown_event(event, index) for event in events]
        state.held.clear()
        return out

    def _final(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        state = self._round
        response = payload.get("response")
        response = response if isinstance(response, dict) else {}
        self.usage = add_usage(self.usage, response.get("usage"))
        output = response.get("output")
        state.final_output = list(output) if isinstance(output, list) else None
        loop = state.loop_allowed and state.synthetic and not state.client_calls
        if loop and payload["type"] == "response.completed" and isinstance(output, list):
            state.output = list(output)  # executed, and the next round continues the stream
            state.held.clear()
            return []
        shown = self._flush_held()
        response.update(self._identity or {})
        response["output"] = list(self._shown)
        if self.usage is not None:
            response["usage"] = self.usage
        payload["response"] = response
        self._ended = True
        return [*shown, payload]
