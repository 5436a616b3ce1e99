"""The response side of a wire format, and `ClientFormat`: both sides, what completion takes.

The request side is the engine's `proxy.engine.wire.WireFormat`. The answer side below is what
the synthetic-tool loop asks of a format: which tools to offer (renamed away from the client's,
removed for the last round), which calls of an answer are the proxy's, what a round of executed
calls adds to the conversation, how a streamed answer is rewritten into the client's one stream,
how usage adds up, and how an error reaches a client whose stream started. Calls, answers and
items stay opaque wire objects here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from proxy.engine.wire import WireFormat

if TYPE_CHECKING:
    from proxy.errors import ProxyError
    from proxy.formats.sse import SSEEvent
    from proxy.synthetic.names import ToolNames
    from proxy.tokens.usage import TokenUsage


class AnswerStream(Protocol):
    """Turns the streamed answers of every round into the one stream the client sees."""

    def start_round(self, loop_allowed: bool) -> None:
        """Before each upstream round; `loop_allowed`: its synthetic calls may be executed."""

    def render(self, events: list[SSEEvent]) -> tuple[bytes, bool]:
        """The bytes the client gets for these events, and whether one of them was an error
        (the stream then ends)."""

    def pending_round(self) -> tuple[Any, list[Any]] | None:
        """After a round: (its content, synthetic calls) when it ended with synthetic calls
        only and may loop (its end was held back), else None. The content is opaque to the
        loop, handed back to `AnswerFormat.round_items` (chat: the assistant text)."""

    def mixed_synthetic_calls(self) -> list[Any]:
        """After a round that also made client calls: its synthetic calls (never streamed)."""

    def mixed_content(self) -> Any:
        """After such a round: the content its synthetic calls go back upstream with
        (`AnswerFormat.round_items`; chat: None, Responses: the reasoning items before them)."""

    def closing(self) -> bytes:
        """The end of the client stream (the summed usage, the done marker)."""

    def missing_end(self) -> bool:
        """After the last round: whether the client got no end of its stream from the upstream
        (a Responses round that ended without its final event; a chat stream's end is the
        proxy's own `closing`)."""

    def error(self, event: bytes) -> bytes:
        """The proxy's error event (`ClientFormat.error_event` / `upstream_error_event`) as this
        stream sends it, after the events it sent (a Responses stream numbers it next)."""


class UsageScanner(Protocol):
    """One streamed answer's usage, read from its bytes as they pass (a scan, nothing parsed)."""

    def feed(self, data: bytes) -> bool:
        """Scan these bytes; True when they stated a usage figure (a later statement of a
        figure replaces an earlier one)."""

    def usage(self) -> TokenUsage | None:
        """The usage the bytes fed so far state (the last value of each figure), None before
        they state the prompt's tokens."""


class AnswerFormat(Protocol):
    """One wire format's answers, as the synthetic-tool loop sees them."""

    @property
    def upstream_route(self) -> str:
        """The endpoint its requests go to, relative to the API root (`Upstream.send`
        `route`), e.g. `/chat/completions`."""

    def summary_bodies(
        self, model: str, instructions: str, prompt: str, max_tokens: int
    ) -> list[dict[str, Any]]:
        """A summarizer call in this format, the bodies to try in order while the upstream
        refuses them (structured output in each form it may know, then none); [] when this
        format carries no summarizer call."""

    def summary_answer(self, data: Any) -> tuple[str, str, dict[str, int]] | None:
        """(the summary's text, the answering model, usage as prompt/completion tokens) of a
        summarizer's answer in this format, or None when it has no text."""

    def error_envelope(self, error: ProxyError, request_id: str) -> dict[str, Any]:
        """The body of an error answer (before any response started) in this format's shape."""

    def provider_history(self, body: dict[str, Any]) -> str | None:
        """The field by which the request continues history the provider holds (a Responses
        `previous_response_id` or `conversation`), which the proxy cannot see: such a request
        goes upstream as it came. None for a request that carries its whole history."""

    def multiple_choices(self, body: dict[str, Any]) -> bool:
        """Whether the request asks for several choices, or for an answer the proxy cannot
        continue (a Responses background response): never continued by another round, the
        synthetic tools are withdrawn."""

    def conversation(self, body: dict[str, Any]) -> list[Any]:
        """A copy of the request's items, leniently ([] when there are none)."""

    def with_unique_tool_names(
        self, body: dict[str, Any], offered: Sequence[str], given: Mapping[str, str] | None = None
    ) -> tuple[dict[str, Any], ToolNames]:
        """The prepared body with its synthetic tools (the `offered` ones, canonical names, last
        in its tools; `given`: the names preparation gave some of them) renamed away from the
        client's tool names, and the names they go by."""

    def without_synthetic_tools(self, body: dict[str, Any], names: ToolNames) -> dict[str, Any]:
        """A copy of `body` offering no synthetic tool (nor a tool choice naming one)."""

    def synthetic_only(
        self, payload: dict[str, Any], names: ToolNames
    ) -> tuple[Any, list[Any]] | None:
        """(content, calls) when the answer makes synthetic calls and nothing else; the content
        is opaque (chat: the assistant text; Responses: the whole output, reasoning included)."""

    def synthetic_calls(self, payload: dict[str, Any], names: ToolNames) -> list[Any]:
        """The synthetic calls of a single-choice answer that also makes client calls (mixed);
        [] otherwise."""

    def mixed_content(self, payload: dict[str, Any], names: ToolNames) -> Any:
        """The content the synthetic calls of a mixed answer go back upstream with
        (`round_items`; chat: None, Responses: the calls with the reasoning items before them,
        which an upstream wants with its calls)."""

    def strip_synthetic_calls(self, payload: dict[str, Any], names: ToolNames) -> bool:
        """Remove the synthetic calls of an answer in place; True when any was removed."""

    def call_id(self, call: Any) -> str | None:
        """The call's id when it has a string one."""

    def call_name(self, call: Any) -> str:
        """The called tool's name."""

    def call_arguments(self, call: Any) -> str | dict[str, Any]:
        """The call's arguments (JSON text or an object); "" when they are neither."""

    def with_call_id(self, call: Any, new_id: str) -> Any:
        """A copy of the call with `new_id` as its id."""

    def round_items(self, content: Any, calls: Sequence[Any], results: Sequence[str]) -> list[Any]:
        """The items a round appends: the assistant item making `calls`, one result per call."""

    def call_ids(self, items: Sequence[Any]) -> set[str]:
        """Every call id the conversation uses already (calls and results)."""

    def stream_filter(self, names: ToolNames) -> AnswerStream:
        """A fresh filter for one client stream."""

    def add_usage(self, total: dict[str, Any] | None, more: Any) -> dict[str, Any] | None:
        """`total` + the usage `more` (None while no round reported any)."""

    def answer_usage(self, payload: dict[str, Any]) -> Any:
        """The usage a whole answer reports, as it came."""

    def prompt_tokens(self, usage: Any) -> int | None:
        """The prompt tokens a usage reports (None when it reports none)."""

    def token_usage(self, usage: Any) -> TokenUsage | None:
        """A usage in neutral terms: the whole prompt, output, cache reads and writes (None
        when it states no prompt tokens)."""

    def usage_scanner(self) -> UsageScanner:
        """A fresh scanner of one streamed answer's usage."""

    def with_usage(self, payload: dict[str, Any], usage: dict[str, Any]) -> None:
        """Put the summed usage in the answer, in place."""

    def error_event(self, error: ProxyError, request_id: str) -> bytes:
        """An error after the stream has started, as this format's stream event."""

    def relayed_error_event(self, error: ProxyError, request_id: str, tail: bytes) -> bytes:
        """An error after a stream relayed as it is, whose last bytes were `tail` (a Responses
        error event is numbered after the last event relayed)."""

    def upstream_error_event(self, body: bytes) -> bytes | None:
        """An upstream's error answer as a stream event, when it is in this format's envelope."""


class ClientFormat(WireFormat, AnswerFormat, Protocol):
    """Both sides of one wire format: what a completion takes."""
