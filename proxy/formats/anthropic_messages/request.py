"""The Anthropic Messages adapter: the request as the engine sees it (`WireFormat`) and the
answer as the synthetic-tool loop sees it (`AnswerFormat`, from `answers`, `stream`, `usage`,
`errors`).

Items are the `messages`, a user message holding `tool_result` blocks split into parts
(`items`); `system` stays outside them (protected, counted with the tools). A rewritten tool
result keeps its block (`tool_use_id`, `is_error`, `cache_control`) and gets a text `content`; a
result holding an image or a document is never rewritten (counted whole, never split).
`render` joins the parts and keeps at most `MAX_CACHE_BREAKPOINTS` `cache_control` markers;
`cache_marks` adds breakpoints where the client placed none (`mark_placement`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from proxy.engine.conversation import Unit
from proxy.engine.wire import PinFacts
from proxy.errors import ErrorCode, ProxyError
from proxy.formats import common, tool_defs
from proxy.formats.anthropic_messages import answers, errors, mark_placement, summary, usage
from proxy.formats.anthropic_messages.cache_marks import capped_cache_marks
from proxy.formats.anthropic_messages.cache_ttl import marked_cache_ttl
from proxy.formats.anthropic_messages.conversation import parse_conversation
from proxy.formats.anthropic_messages.fields import (
    any_text,
    output_limit,
    replaced_text,
    request_model,
    request_stream,
    role_of,
    text_of,
    tool_use_blocks,
)
from proxy.formats.anthropic_messages.items import (
    PART_KEY,
    is_result_part,
    join,
    result_block,
    split,
)
from proxy.formats.anthropic_messages.stream import StreamFilter
from proxy.formats.common import str_field
from proxy.jsonio import dumps
from proxy.synthetic.base import ToolSpec
from proxy.synthetic.names import ToolNames
from proxy.tokens.counters import MESSAGE_FRAMING, REPLY_PRIMER, TokenCounter
from proxy.upstream.base import MESSAGES_ROUTE


class AnthropicMessages:
    """`/v1/messages`."""

    name = "anthropic_messages"
    items_param = "messages"
    upstream_route = MESSAGES_ROUTE

    def items(self, body: dict[str, Any]) -> list[Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ProxyError(
                ErrorCode.invalid_request, "messages: must be a non-empty array", param="messages"
            )
        return split(messages)

    model = staticmethod(request_model)
    stream = staticmethod(request_stream)
    output_limit = staticmethod(output_limit)
    cache_ttl = staticmethod(marked_cache_ttl)
    parse = staticmethod(parse_conversation)
    summary_bodies = staticmethod(summary.summary_bodies)
    summary_answer = staticmethod(summary.summary_answer)

    # The answer side.
    multiple_choices = staticmethod(answers.multiple_choices)
    conversation = staticmethod(answers.conversation)
    with_unique_tool_names = staticmethod(answers.with_unique_tool_names)
    without_synthetic_tools = staticmethod(answers.without_synthetic_tools)
    synthetic_only = staticmethod(answers.synthetic_only)
    strip_synthetic_calls = staticmethod(answers.strip_synthetic_calls)
    synthetic_calls = staticmethod(answers.synthetic_calls)
    mixed_content = staticmethod(answers.mixed_content)
    call_id = staticmethod(answers.call_id)
    call_name = staticmethod(answers.call_name)
    call_arguments = staticmethod(answers.call_arguments)
    with_call_id = staticmethod(answers.with_call_id)
    round_items = staticmethod(answers.round_items)
    call_ids = staticmethod(answers.call_ids)
    upstream_error_event = staticmethod(errors.upstream_error_event)
    error_event = staticmethod(errors.error_event)
    relayed_error_event = staticmethod(errors.relayed_error_event)
    add_usage = staticmethod(usage.add_usage)
    answer_usage = staticmethod(usage.answer_usage)
    prompt_tokens = staticmethod(usage.prompt_tokens)
    token_usage = staticmethod(usage.token_usage)
    usage_scanner = staticmethod(usage.usage_scanner)
    with_usage = staticmethod(usage.with_usage)

    def error_envelope(self, error: ProxyError, request_id: str) -> dict[str, Any]:
        return errors.error_body(error, request_id)

    def provider_history(self, body: dict[str, Any]) -> str | None:
        """Never: the request carries its whole history."""
        return None

    def stream_filter(self, names: ToolNames) -> StreamFilter:
        return StreamFilter(names)

    invalid_error = staticmethod(common.invalid_error)
    cache_marks = staticmethod(mark_placement.cache_marks)

    def is_tool_result(self, item: Any) -> bool:
        return is_result_part(item)

    def result_text(self, item: Any) -> str | None:
        block = result_block(item)
        return text_of(block.get("content")) if block is not None else None

    def with_result_text(self, item: Any, text: str) -> Any:
        block = result_block(item)
        if block is None:
            return self.with_item_text(item, text)
        copy = dict(item)
        copy["content"] = [{**block, "content": replaced_text(block.get("content"), text)}]
        return copy

    def item_text(self, item: Any) -> str | None:
        if not isinstance(item, dict) or is_result_part(item):
            return self.result_text(item) if is_result_part(item) else None
        return text_of(item.get("content"))

    def with_item_text(self, item: Any, text: str) -> Any:
        copy = dict(item)
        copy["content"] = replaced_text(item.get("content"), text)
        return copy

    def result_meta(self, item: Any) -> dict[str, Any]:
        return {"tool_use_id": str_field(result_block(item), "tool_use_id")}

    def tool_names(self, items: Sequence[Any], units: Iterable[Unit]) -> dict[int, str]:
        """Through the `tool_use` block of the same exchange with the result's `tool_use_id`."""
        names: dict[int, str] = {}
        for unit in units:
            if not unit.is_tool_exchange:
                continue
            by_id = {
                block["id"]: str(block.get("name"))
                for block in tool_use_blocks(items[unit.start])
                if isinstance(block.get("id"), str)
            }
            for index in unit.result_indices:
                name = by_id.get(str_field(result_block(items[index]), "tool_use_id") or "")
                if name is not None:
                    names[index] = name
        return names

    def pin_facts(self, item: Any) -> PinFacts:
        if not isinstance(item, dict):
            return None, None, "", False
        return role_of(item), None, any_text(item.get("content")), is_result_part(item)

    def notice_item(self, role: str, text: str) -> Any:
        """Always a user message: Messages have no system role (consecutive user messages are
        one turn for the API)."""
        return {"role": "user", "content": text}

    # The tool definitions (`defer_tools`).
    tool_list = staticmethod(tool_defs.tool_list)
    with_tool_list = staticmethod(tool_defs.with_tool_list)
    forced_tool = staticmethod(tool_defs.forced_tool)
    tool_entry = staticmethod(tool_defs.anthropic_tool_entry)
    slim_tool = staticmethod(tool_defs.slim_anthropic_tool)

    def synthetic_tools(self, specs: Sequence[ToolSpec]) -> list[Any]:
        return [
            {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}
            for spec in specs
        ]

    def overhead_tokens(
        self,
        body: dict[str, Any],
        counter: TokenCounter,
        added_tools: Sequence[Any] | None = None,
    ) -> int:
        """`system`, the `tools` schema and `tool_choice`, plus the reply primer."""
        tools = body.get("tools")
        if added_tools is not None:
            tools = (tools if isinstance(tools, list) else []) + list(added_tools)
        system = body.get("system")
        system_tokens = 0
        if isinstance(system, str) and system:
            system_tokens = MESSAGE_FRAMING + counter.count_text(system)
        elif system is not None:
            system_tokens = counter.count_message({"role": "system", "content": system})
        return system_tokens + counter.count_tools(tools, body.get("tool_choice")) + REPLY_PRIMER

    def render(
        self, body: dict[str, Any], items: list[Any], added_tools: Sequence[Any]
    ) -> dict[str, Any]:
        rendered = dict(body)
        rendered["messages"] = join(items)
        if added_tools:
            tools = rendered.get("tools")
            rendered["tools"] = (tools if isinstance(tools, list) else []) + list(added_tools)
        return capped_cache_marks(rendered)

    def encode(self, body: dict[str, Any]) -> bytes:
        return dumps(body)

    def is_answer(self, item: Any) -> bool:
        return role_of(item) == "assistant"

    def canonical(self, item: Any) -> bytes:
        """What the item says, as bytes that a client's re-serialisation and its moving cache
        marks leave alone: no null fields (an SDK writes `citations: null` and the like), no
        `cache_control` (Claude Code moves its mark to the newest message on every request), a
        string content as its one text block, and no part mark's position."""
        if isinstance(item, dict):
            item = {k: v for k, v in item.items() if k != PART_KEY}
            if isinstance(item.get("content"), str):
                item["content"] = [{"type": "text", "text": item["content"]}]
        return dumps(_meaning(item))


def _meaning(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _meaning(v) for k, v in value.items() if v is not None and k != "cache_control"
        }
    if isinstance(value, list):
        return [_meaning(v) for v in value]
    return value


ANTHROPIC_MESSAGES = AnthropicMessages()
