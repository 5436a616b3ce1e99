"""The OpenAI Chat Completions adapter: the request as the engine sees it (`WireFormat`) and the
answer as the synthetic-tool loop sees it (`AnswerFormat`, from `answers`, `stream`, `usage`,
`errors`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from proxy.engine.conversation import Unit
from proxy.engine.wire import PinFacts
from proxy.errors import ErrorCode, ProxyError
from proxy.formats import common, tool_defs
from proxy.formats.common import add_usage
from proxy.formats.openai_chat import answers, summary
from proxy.formats.openai_chat.conversation import canonical_message, parse_conversation
from proxy.formats.openai_chat.errors import error_event, relayed_error_event
from proxy.formats.openai_chat.fields import (
    content_text,
    message_text,
    output_limit,
    parts_layout,
    request_model,
    request_stream,
    with_content,
)
from proxy.formats.openai_chat.stream import StreamFilter
from proxy.formats.openai_chat.usage import (
    answer_usage,
    prompt_tokens,
    token_usage,
    usage_scanner,
    with_usage,
)
from proxy.jsonio import dumps
from proxy.synthetic.base import ToolSpec
from proxy.synthetic.names import ToolNames
from proxy.tokens.counters import REPLY_PRIMER, TokenCounter
from proxy.upstream.base import CHAT_COMPLETIONS_ROUTE


class OpenAIChat:
    """`/v1/chat/completions`: items are the `messages`; tool results are `tool` messages (or
    legacy `function` ones) whose `content` is the result text."""

    name = "openai_chat"
    items_param = "messages"
    upstream_route = CHAT_COMPLETIONS_ROUTE

    def items(self, body: dict[str, Any]) -> list[Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ProxyError(
                ErrorCode.invalid_request,
                "'messages' must be a non-empty array",
                param="messages",
            )
        return messages

    # The accessors themselves (no extra call per message on the hot paths).
    model = staticmethod(request_model)
    stream = staticmethod(request_stream)
    output_limit = staticmethod(output_limit)
    cache_ttl = staticmethod(common.retention_ttl)
    parse = staticmethod(parse_conversation)
    summary_bodies = staticmethod(summary.summary_bodies)
    summary_answer = staticmethod(summary.summary_answer)
    result_text = staticmethod(content_text)
    with_result_text = staticmethod(with_content)
    item_text = staticmethod(content_text)
    with_item_text = staticmethod(with_content)

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
    upstream_error_event = staticmethod(answers.upstream_error_event)
    add_usage = staticmethod(add_usage)
    answer_usage = staticmethod(answer_usage)
    prompt_tokens = staticmethod(prompt_tokens)
    token_usage = staticmethod(token_usage)
    usage_scanner = staticmethod(usage_scanner)
    with_usage = staticmethod(with_usage)
    error_event = staticmethod(error_event)
    relayed_error_event = staticmethod(relayed_error_event)

    def error_envelope(self, error: ProxyError, request_id: str) -> dict[str, Any]:
        return error.envelope(request_id)

    def provider_history(self, body: dict[str, Any]) -> str | None:
        """Never: the request carries its whole history."""
        return None

    def stream_filter(self, names: ToolNames) -> StreamFilter:
        return StreamFilter(names)

    invalid_error = staticmethod(common.invalid_error)
    cache_marks = staticmethod(common.no_cache_marks)

    def is_tool_result(self, item: Any) -> bool:
        return isinstance(item, dict) and item.get("role") in ("tool", "function")

    def result_meta(self, item: Any) -> dict[str, Any]:
        """The call id, and for a content given as text parts their layout (`content_parts`,
        see `fields.parts_layout`): the artifact holds the joined text, the layout rebuilds the
        list with its boundaries and `cache_control` markers."""
        meta = {"tool_call_id": item.get("tool_call_id") if isinstance(item, dict) else None}
        layout = parts_layout(item)
        if layout is not None:
            meta["content_parts"] = layout
        return meta

    def tool_names(self, items: Sequence[Any], units: Iterable[Unit]) -> dict[int, str]:
        """Through the call with the result's `tool_call_id` in the same exchange (ids may repeat
        across turns: some servers number them per response), else the result's own `name`."""
        names: dict[int, str] = {}
        for unit in units:
            if not unit.is_tool_exchange:
                continue
            calls = items[unit.start].get("tool_calls")
            by_id = {
                call["id"]: str(call["function"].get("name"))
                for call in (calls if isinstance(calls, list) else ())
                if isinstance(call, dict)
                and isinstance(call.get("id"), str)
                and isinstance(call.get("function"), dict)
            }
            for index in unit.result_indices:
                message = items[index]
                call_id = message.get("tool_call_id")
                name = (by_id.get(call_id) if isinstance(call_id, str) else None) or message.get(
                    "name"
                )
                if isinstance(name, str):
                    names[index] = name
        return names

    def pin_facts(self, item: Any) -> PinFacts:
        if not isinstance(item, dict):
            return None, None, "", False
        role, name = item.get("role"), item.get("name")
        role = role if isinstance(role, str) else None
        name = name if isinstance(name, str) else None
        # A `tool` message marked as the proxy's holds an offloaded result; legacy `function`
        # results never were told apart (a marked one counts as a notice, as it always did).
        return role, name, message_text(item), role == "tool"

    def notice_item(self, role: str, text: str) -> Any:
        return {"role": role, "content": text}

    # The tool definitions (`defer_tools`).
    tool_list = staticmethod(tool_defs.tool_list)
    with_tool_list = staticmethod(tool_defs.with_tool_list)
    forced_tool = staticmethod(tool_defs.forced_tool)
    tool_entry = staticmethod(tool_defs.chat_tool_entry)
    slim_tool = staticmethod(tool_defs.slim_chat_tool)

    def synthetic_tools(self, specs: Sequence[ToolSpec]) -> list[Any]:
        return [
            {
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                },
            }
            for spec in specs
        ]

    def overhead_tokens(
        self,
        body: dict[str, Any],
        counter: TokenCounter,
        added_tools: Sequence[Any] | None = None,
    ) -> int:
        """The `tools` schema and `tool_choice`, plus the reply primer."""
        tools = body.get("tools")
        if added_tools is not None:
            tools = (tools if isinstance(tools, list) else []) + list(added_tools)
        return counter.count_tools(tools, body.get("tool_choice")) + REPLY_PRIMER

    def render(
        self, body: dict[str, Any], items: list[Any], added_tools: Sequence[Any]
    ) -> dict[str, Any]:
        rendered = dict(body)
        rendered["messages"] = items
        if added_tools:
            tools = rendered.get("tools")
            rendered["tools"] = (tools if isinstance(tools, list) else []) + list(added_tools)
        return rendered

    def encode(self, body: dict[str, Any]) -> bytes:
        return dumps(body)

    def is_answer(self, item: Any) -> bool:
        return isinstance(item, dict) and item.get("role") == "assistant"

    def canonical(self, item: Any) -> bytes:
        return canonical_message(item)


OPENAI_CHAT = OpenAIChat()
