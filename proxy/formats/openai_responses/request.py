"""The OpenAI Responses adapter (`POST /v1/responses`): the request as the engine sees it
(`WireFormat`: the items are `input`, `instructions` are overhead) and the answer as the
synthetic-tool loop sees it (`AnswerFormat`, from `answers`, `stream`, `errors`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from proxy.engine.conversation import Problem, Unit
from proxy.engine.wire import PinFacts
from proxy.errors import ErrorCode, ProxyError
from proxy.formats import common, tool_defs
from proxy.formats.common import add_usage, str_field
from proxy.formats.openai_responses import answers, errors, usage
from proxy.formats.openai_responses.conversation import canonical_item, parse_conversation
from proxy.formats.openai_responses.fields import (
    any_text,
    call_id_of,
    call_name,
    content_text,
    is_call,
    is_output,
    item_type,
    output_limit,
    output_text,
    provider_history,
    request_model,
    request_stream,
    role_of,
    with_content,
    with_output,
)
from proxy.formats.openai_responses.stream import ResponsesStream
from proxy.jsonio import dumps
from proxy.synthetic.base import ToolSpec
from proxy.synthetic.names import ToolNames
from proxy.tokens.counters import REPLY_PRIMER, TokenCounter

RESPONSES_ROUTE = "/responses"
_MODEL_ITEMS = frozenset({"reasoning", "message"})


class OpenAIResponses:
    """`/v1/responses`: items are the `input` items; tool results are the call outputs
    (`function_call_output`, ...) whose `output` text is the result."""

    name = "openai_responses"
    items_param = "input"
    upstream_route = RESPONSES_ROUTE

    def items(self, body: dict[str, Any]) -> list[Any]:
        items = body.get("input")
        if isinstance(items, str):
            return [{"role": "user", "content": items}]
        if not isinstance(items, list) or not items:
            raise ProxyError(
                ErrorCode.invalid_request,
                "'input' must be a string or a non-empty array of items",
                param="input",
            )
        return items

    model = staticmethod(request_model)
    stream = staticmethod(request_stream)
    output_limit = staticmethod(output_limit)
    cache_ttl = staticmethod(common.retention_ttl)
    parse = staticmethod(parse_conversation)
    provider_history = staticmethod(provider_history)
    cache_marks = staticmethod(common.no_cache_marks)

    def error_envelope(self, error: ProxyError, request_id: str) -> dict[str, Any]:
        return error.envelope(request_id)

    result_text = staticmethod(output_text)
    with_result_text = staticmethod(with_output)
    item_text = staticmethod(content_text)
    with_item_text = staticmethod(with_content)

    # The answer side.
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
    add_usage = staticmethod(add_usage)
    answer_usage = staticmethod(usage.answer_usage)
    prompt_tokens = staticmethod(usage.prompt_tokens)
    token_usage = staticmethod(usage.token_usage)
    usage_scanner = staticmethod(usage.usage_scanner)
    with_usage = staticmethod(usage.with_usage)
    error_event = staticmethod(errors.error_event)
    relayed_error_event = staticmethod(errors.relayed_error_event)
    upstream_error_event = staticmethod(errors.upstream_error_event)

    def multiple_choices(self, body: dict[str, Any]) -> bool:
        """A response has one output, but a background one (`background: true`) is never
        continued by another round either: the provider runs it on its own and the client
        fetches it later, so a call of the proxy's tools in it would reach the client."""
        return body.get("background") is True

    def stream_filter(self, names: ToolNames) -> ResponsesStream:
        return ResponsesStream(names)

    def summary_bodies(
        self, model: str, instructions: str, prompt: str, max_tokens: int
    ) -> list[dict[str, Any]]:
        """None: a summarizer call goes in its upstream's native format, never Responses."""
        return []

    def summary_answer(self, data: Any) -> tuple[str, str, dict[str, int]] | None:
        return None

    def invalid_error(self, problems: Sequence[Problem]) -> ProxyError:
        return common.invalid_error(problems, id_key="call_id")

    def is_tool_result(self, item: Any) -> bool:
        return is_output(item)

    def result_meta(self, item: Any) -> dict[str, Any]:
        return {"call_id": call_id_of(item), "type": item_type(item)}

    def tool_names(self, items: Sequence[Any], units: Iterable[Unit]) -> dict[int, str]:
        """Through the call with the output's `call_id` in the same exchange."""
        names: dict[int, str] = {}
        for unit in units:
            if not unit.is_tool_exchange:
                continue
            calls = range(unit.start, unit.start + unit.call_items)
            by_id = {
                call_id: name
                for k in calls
                if is_call(items[k])
                and (call_id := call_id_of(items[k])) is not None
                and (name := call_name(items[k])) is not None
            }
            for index in unit.result_indices:
                name = by_id.get(call_id_of(items[index]) or "")
                if name is not None:
                    names[index] = name
        return names

    def pin_facts(self, item: Any) -> PinFacts:
        """A call output has the role `tool` (what pin rules say of tool results)."""
        result = is_output(item)
        role = "tool" if result else role_of(item)
        return role, str_field(item, "name"), any_text(item), result

    def notice_item(self, role: str, text: str) -> Any:
        return {"type": "message", "role": role, "content": text}

    # The tool definitions (`defer_tools`).
    tool_list = staticmethod(tool_defs.tool_list)
    with_tool_list = staticmethod(tool_defs.with_tool_list)
    forced_tool = staticmethod(tool_defs.forced_tool)
    tool_entry = staticmethod(tool_defs.responses_tool_entry)
    slim_tool = staticmethod(tool_defs.slim_responses_tool)

    def synthetic_tools(self, specs: Sequence[ToolSpec]) -> list[Any]:
        return [
            {
                "type": "function",
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
                "strict": False,
            }
            for spec in specs
        ]

    def overhead_tokens(
        self,
        body: dict[str, Any],
        counter: TokenCounter,
        added_tools: Sequence[Any] | None = None,
    ) -> int:
        """`instructions` (text, or items), the `tools` and `tool_choice`, the reply primer."""
        tools = body.get("tools")
        if added_tools is not None:
            tools = (tools if isinstance(tools, list) else []) + list(added_tools)
        instructions = body.get("instructions")
        if isinstance(instructions, str):
            fixed = counter.count_message({"role": "system", "content": instructions})
        elif isinstance(instructions, list):
            fixed = sum(counter.count_message(item) for item in instructions)
        else:
            fixed = 0
        return fixed + counter.count_tools(tools, body.get("tool_choice")) + REPLY_PRIMER

    def render(
        self, body: dict[str, Any], items: list[Any], added_tools: Sequence[Any]
    ) -> dict[str, Any]:
        rendered = dict(body)
        rendered["input"] = items
        if added_tools:
            tools = rendered.get("tools")
            rendered["tools"] = (tools if isinstance(tools, list) else []) + list(added_tools)
        return rendered

    def encode(self, body: dict[str, Any]) -> bytes:
        return dumps(body)

    def is_answer(self, item: Any) -> bool:
        """The model's items: assistant messages, reasoning and calls."""
        kind = item_type(item)
        if kind == "message":
            return role_of(item) == "assistant"
        return kind in _MODEL_ITEMS or is_call(item)

    def canonical(self, item: Any) -> bytes:
        return canonical_item(item)


OPENAI_RESPONSES = OpenAIResponses()
