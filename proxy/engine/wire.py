"""The seam between the engine and a client's wire format: what the engine asks a format adapter.

The engine never reads a request body or a message itself. It works on a list of opaque *items*
that the adapter hands it (for OpenAI Chat Completions: the `messages`; an adapter may choose
another granularity, e.g. Responses `input` items), on the neutral structure the adapter parses
from them (`engine.conversation`), and on the few facts below. Items are never changed in place:
what stays is forwarded as the very object the client sent, and a rewritten tool result is a copy
with every other field kept.

How the other formats map onto it (each one adapter module under `proxy/formats/`):
- Anthropic Messages: the `system` field is outside the items (counted in `overhead_tokens`,
  system prefix empty); an assistant message with `tool_use` blocks and the next user message
  holding their `tool_result` blocks form one tool exchange (`Unit`), and such a user message does
  not open a turn; `thinking` blocks stay inside their (untouched) assistant message.
- OpenAI Responses: `instructions` are outside the items; a `function_call` item (with the
  `reasoning` items before it: `Unit.call_items`) and the `function_call_output` items answering
  it by `call_id` form one unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

if TYPE_CHECKING:
    from proxy.engine.conversation import Conversation, Problem, Unit
    from proxy.errors import ProxyError
    from proxy.synthetic.base import ToolSpec
    from proxy.synthetic.catalog import ToolEntry
    from proxy.tokens.counters import TokenCounter


PinFacts: TypeAlias = tuple[str | None, str | None, str, bool]
"""What the policy's pin rules (`protect.pinned`) match an item against, as a plain tuple (built
for every item of a reduced request): `(role, name, text, result_item)` --
- role: the item's role when it has a string one (rules match it literally);
- name: the item's own name, if any (a rule's `name` also matches the tool of a result);
- text: the item's text (text parts joined; "" when it has none);
- result_item: a tool-result item (text marked as the proxy's is an offloaded result there, not
  a notice)."""


CacheMarksMode: TypeAlias = Literal["auto", "keep", "off"]
"""The policy's `cache_marks`: add breakpoints when the client placed none, keep the client's,
or remove them all."""


@dataclass(frozen=True)
class CacheMarks:
    """What a format did with a request's prompt-cache breakpoints (`WireFormat.cache_marks`)."""

    body: dict[str, Any] | None
    """The body with breakpoints added or removed; None when it stays as it is."""
    placed: tuple[str, ...] = ()
    """Where the proxy put a breakpoint, as paths into the body (`messages[3].content[0]`)."""
    client: int = 0
    """The breakpoints the request came with."""
    removed: int = 0
    through_items: int | None = None
    """How many leading items the last breakpoint of the body that goes covers (0: only tools
    and system are marked; None: nothing is): what a provider writes to its cache."""


class WireFormat(Protocol):
    """One inbound wire format, as the engine sees it (implemented in `proxy.formats`)."""

    @property
    def name(self) -> str:
        """The registry name, e.g. `openai_chat`."""

    @property
    def items_param(self) -> str:
        """The body field that holds the items (the `param` of a refusal), e.g. `messages`."""

    def items(self, body: dict[str, Any]) -> list[Any]:
        """The conversation's items; raises `ProxyError(invalid_request)` when there are none."""

    def model(self, body: dict[str, Any]) -> str:
        """The requested model, or "" when missing or not a string."""

    def stream(self, body: dict[str, Any]) -> bool:
        """True only when the client asked for a streamed answer."""

    def output_limit(self, body: dict[str, Any]) -> int | None:
        """The request's explicit output limit (a non-negative integer), if any."""

    def cache_ttl(self, body: dict[str, Any]) -> int | None:
        """The prompt-cache lifetime (seconds) the request itself asks for where cuts happen
        (Anthropic message marks with `"ttl": "1h"`, OpenAI `prompt_cache_retention: "24h"`);
        None when it asks for none (the upstream's configured lifetime applies)."""

    def parse(self, items: Sequence[Any]) -> Conversation:
        """System prefix, turns, units and structural problems (worded for this format)."""

    def invalid_error(self, problems: Sequence[Problem]) -> ProxyError:
        """The refusal of structurally broken input (`on_invalid: reject`); `problems` is not
        empty."""

    def is_tool_result(self, item: Any) -> bool:
        """Whether an item is a tool result, from the item alone (a quick scan before any
        parse; the parse decides what is a well-formed exchange)."""

    def result_text(self, item: Any) -> str | None:
        """The text of a tool result; None when it is not all text (then it is never rewritten)."""

    def with_result_text(self, item: Any, text: str) -> Any:
        """A copy of a tool result with `text` as its content and every other field kept."""

    def item_text(self, item: Any) -> str | None:
        """The text of any item whose content is all text; None otherwise (never rewritten)."""

    def with_item_text(self, item: Any, text: str) -> Any:
        """A copy of an item with `text` as its content and every other field kept."""

    def result_meta(self, item: Any) -> dict[str, Any]:
        """What identifies a tool result on this wire (kept in its artifact's metadata)."""

    def tool_names(self, items: Sequence[Any], units: Iterable[Unit]) -> dict[int, str]:
        """Result index -> its tool's name, for the results of `units` (each resolved within its
        own unit: call ids may repeat elsewhere)."""

    def pin_facts(self, item: Any) -> PinFacts:
        """`(role, name, text, result_item)` of an item (see `PinFacts`)."""

    def notice_item(self, role: str, text: str) -> Any:
        """The item that stands where dropped turns were (`role`: user, system or developer)."""

    def tool_list(self, body: dict[str, Any]) -> list[Any]:
        """The request's tool definitions ([] when it has no list)."""

    def with_tool_list(self, body: dict[str, Any], tools: list[Any]) -> dict[str, Any]:
        """A copy of `body` with `tools` as its tool definitions, every other field kept."""

    def forced_tool(self, body: dict[str, Any]) -> str | None:
        """The name of the tool the request's `tool_choice` forces, if it names one."""

    def tool_entry(self, tool: Any) -> ToolEntry | None:
        """A tool definition as the `defer_tools` step ranks it; None for one that is always
        sent (a built-in or server tool, or one without a name)."""

    def slim_tool(self, tool: Any) -> Any:
        """The tool with its JSON schema slimmed losslessly (`formats.schema_slim`); the same
        object when nothing changes."""

    def synthetic_tools(self, specs: Sequence[ToolSpec]) -> list[Any]:
        """The proxy's own tools in this format's tool-definition shape."""

    def overhead_tokens(
        self,
        body: dict[str, Any],
        counter: TokenCounter,
        added_tools: Sequence[Any] | None = None,
    ) -> int:
        """Tokens of the request outside its items (tools, tool choice, reply primer, ...).
        With `added_tools` (even empty) the client's tools count only when they are a list, and
        `added_tools` are counted after them."""

    def render(
        self, body: dict[str, Any], items: list[Any], added_tools: Sequence[Any]
    ) -> dict[str, Any]:
        """A copy of `body` with `items` in place of its own and `added_tools` (if any) after
        its tools; every other field kept."""

    def encode(self, body: dict[str, Any]) -> bytes:
        """The bytes that go upstream for a rendered body."""

    def is_answer(self, item: Any) -> bool:
        """Whether the item is the model's (where the working set re-inserts the synthetic
        exchanges that preceded it)."""

    def cache_marks(
        self, body: dict[str, Any], mode: CacheMarksMode, stable_items: int
    ) -> CacheMarks | None:
        """The request's prompt-cache breakpoints under `mode`, for an upstream that caches at
        them (Anthropic's `cache_control`); `stable_items`: the leading items of `body` through
        the proxy's own stable stand-in (a notice or a summary; 0: none). None: this wire format
        has no such breakpoints."""

    def canonical(self, item: Any) -> bytes:
        """The item's meaning as bytes that a client's re-serialisation does not change (what
        the working set's keys are made of)."""
