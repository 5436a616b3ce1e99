"""The Responses adapter's request side (`WireFormat`) and its registration."""

from __future__ import annotations

from typing import Any

import pytest
from shared_tokens import counter_for

from proxy.errors import ProxyError
from proxy.formats import FORMATS
from proxy.formats.openai_responses import OPENAI_RESPONSES, provider_history
from proxy.formats.openai_responses.fields import output_limit
from proxy.synthetic.registry import tool_specs
from proxy.tokens.counters import REPLY_PRIMER

WIRE = OPENAI_RESPONSES
COUNTER = counter_for("gpt-4o")
CALL = {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "found it", "extra": 1}


def test_registered_by_name_with_its_route() -> None:
    assert FORMATS["openai_responses"] is WIRE
    assert WIRE.items_param == "input" and WIRE.upstream_route == "/responses"


def test_items_of_a_string_input_and_of_a_list() -> None:
    assert WIRE.items({"input": "hi"}) == [{"role": "user", "content": "hi"}]
    items = [{"role": "user", "content": "x"}]
    assert WIRE.items({"input": items}) is items
    for bad in ({}, {"input": []}, {"input": 3}):
        with pytest.raises(ProxyError) as caught:
            WIRE.items(bad)
        assert caught.value.param == "input"


def test_model_stream_and_output_limit() -> None:
    body = {"model": "gpt-5", "stream": True, "max_output_tokens": 500}
    assert (WIRE.model(body), WIRE.stream(body), WIRE.output_limit(body)) == ("gpt-5", True, 500)
    assert WIRE.stream({"stream": 1}) is False
    assert output_limit({"max_output_tokens": True}) is None
    assert output_limit({"max_output_tokens": -1}) is None


def test_result_text_and_rewrite_keep_every_other_field() -> None:
    assert WIRE.is_tool_result(OUTPUT) and not WIRE.is_tool_result(CALL)
    assert WIRE.result_text(OUTPUT) == "found it"
    parts = {
        **OUTPUT,
        "output": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
    }
    assert WIRE.result_text(parts) == "ab"
    image = {**OUTPUT, "output": [{"type": "input_image", "image_url": "data:..."}]}
    assert WIRE.result_text(image) is None
    assert WIRE.with_result_text(OUTPUT, "short") == {**OUTPUT, "output": "short"}
    assert OUTPUT["output"] == "found it"  # a copy
    assert WIRE.result_meta(OUTPUT) == {"call_id": "c1", "type": "function_call_output"}


def test_item_text_of_messages() -> None:
    message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}
    assert WIRE.item_text(message) == "q"
    assert WIRE.with_item_text(message, "new")["content"] == "new"
    assert WIRE.item_text({"role": "user", "content": [{"type": "input_image"}]}) is None


def test_tool_names_resolve_within_each_exchange() -> None:
    items = [
        {"role": "user", "content": "q"},
        CALL,
        OUTPUT,
        {**CALL, "name": "ls"},
        {**OUTPUT, "output": "b"},
    ]
    units = WIRE.parse(items).units
    assert WIRE.tool_names(items, units) == {2: "grep", 4: "ls"}
    shell = [
        {"role": "user", "content": "q"},
        {"type": "local_shell_call", "call_id": "s", "action": {}},
        {"type": "local_shell_call_output", "id": "s", "output": "x"},
    ]
    assert WIRE.tool_names(shell, WIRE.parse(shell).units) == {2: "local_shell"}


def test_pin_facts() -> None:
    assert WIRE.pin_facts(OUTPUT) == ("tool", None, "found it", True)
    assert WIRE.pin_facts({"role": "user", "content": "keep"}) == ("user", None, "keep", False)
    assert WIRE.pin_facts(CALL) == (None, "grep", "{}", False)
    assert WIRE.pin_facts("x") == (None, None, "", False)


def test_notice_and_synthetic_tools_in_the_responses_shape() -> None:
    assert WIRE.notice_item("user", "n") == {"type": "message", "role": "user", "content": "n"}
    tools = WIRE.synthetic_tools(tool_specs(20_000))
    assert [t["name"] for t in tools] == ["read_context_artifact", "search_context_artifact"]
    assert all(t["type"] == "function" and "parameters" in t for t in tools)


def test_overhead_counts_instructions_tools_and_tool_choice() -> None:
    tool = {"type": "function", "name": "grep", "parameters": {"type": "object"}}
    bare = WIRE.overhead_tokens({}, COUNTER)
    assert bare == REPLY_PRIMER
    with_instructions = WIRE.overhead_tokens({"instructions": "Be careful. " * 50}, COUNTER)
    assert with_instructions > bare + 100
    assert WIRE.overhead_tokens({"tools": [tool]}, COUNTER) > bare
    added = WIRE.synthetic_tools(tool_specs(20_000))
    more = WIRE.overhead_tokens({"tools": [tool]}, COUNTER, added)
    assert more == WIRE.overhead_tokens({"tools": [tool, *added]}, COUNTER)


def test_render_replaces_input_and_appends_tools() -> None:
    body: dict[str, Any] = {"model": "m", "input": "q", "tools": [CALL], "store": False}
    rendered = WIRE.render(body, [OUTPUT], ["T"])
    assert rendered == {"model": "m", "input": [OUTPUT], "tools": [CALL, "T"], "store": False}
    assert body["input"] == "q"
    assert WIRE.encode({"a": 1}) == b'{"a":1}'


def test_answers_and_history_held_by_the_provider() -> None:
    assert WIRE.is_answer({"type": "reasoning"}) and WIRE.is_answer(CALL)
    assert WIRE.is_answer({"role": "assistant", "content": "x"})
    assert not WIRE.is_answer(OUTPUT) and not WIRE.is_answer({"role": "user", "content": "x"})
    assert provider_history({"previous_response_id": "resp_1"}) == "previous_response_id"
    assert provider_history({"conversation": {"id": "conv_1"}}) == "conversation"
    assert provider_history({"previous_response_id": None, "store": False}) is None


def test_invalid_error_names_the_item() -> None:
    problems = WIRE.parse([{"role": "user", "content": "q"}, OUTPUT]).problems
    error = WIRE.invalid_error(problems)
    assert error.param == "input[1]" and error.message.startswith("input[1]: ")
    assert error.details == {
        "problems": [{"index": 1, "call_id": "c1", "reason": problems[0].reason}]
    }


def test_extended_prompt_cache_retention_asks_for_a_day() -> None:
    base = {"model": "gpt-5.1", "input": "hi"}
    assert OPENAI_RESPONSES.cache_ttl(base) is None
    assert OPENAI_RESPONSES.cache_ttl({**base, "prompt_cache_retention": "24h"}) == 24 * 3600
