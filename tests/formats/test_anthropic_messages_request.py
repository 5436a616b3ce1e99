"""`formats.anthropic_messages.request`: the adapter as the engine sees it."""

from __future__ import annotations

from typing import Any

import pytest
from shared_tokens import counter_for

from proxy.engine.conversation import Unit
from proxy.errors import ErrorCode, ProxyError
from proxy.formats import FORMATS
from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES as WIRE
from proxy.formats.anthropic_messages.cache_marks import count_marks
from proxy.formats.anthropic_messages.items import PART_KEY
from proxy.synthetic.registry import tool_specs

CACHE = {"type": "ephemeral"}


def result_message(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def result(call_id: str, content: Any, **more: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **more}


def test_registered_by_name() -> None:
    assert FORMATS["anthropic_messages"] is WIRE


def test_request_facts() -> None:
    body = {"model": "claude-haiku-4-5", "max_tokens": 64, "stream": True, "messages": [{}]}
    assert (WIRE.model(body), WIRE.output_limit(body), WIRE.stream(body)) == (
        "claude-haiku-4-5",
        64,
        True,
    )
    assert WIRE.output_limit({"max_tokens": True}) is None
    with pytest.raises(ProxyError) as raised:
        WIRE.items({"messages": []})
    assert raised.value.code is ErrorCode.invalid_request


def test_a_rewritten_result_keeps_its_block_fields_and_the_cache_breakpoint() -> None:
    block = result(
        "t1",
        [{"type": "text", "text": "a"}, {"type": "text", "text": "b", "cache_control": CACHE}],
        is_error=True,
    )
    (item,) = WIRE.items({"messages": [result_message(block)]})
    assert WIRE.is_tool_result(item) and WIRE.result_text(item) == "ab"
    rewritten = WIRE.with_result_text(item, "preview")
    assert rewritten["content"] == [
        result("t1", [{"type": "text", "text": "preview", "cache_control": CACHE}], is_error=True)
    ]
    assert item["content"] == [block]  # the original is untouched
    assert WIRE.result_meta(item) == {"tool_use_id": "t1"}


@pytest.mark.parametrize(
    "thinking",
    [
        {"type": "thinking", "thinking": "t", "signature": "s", "cache_control": CACHE},
        {"type": "redacted_thinking", "data": "opaque"},
    ],
)
def test_capping_cache_marks_never_changes_an_assistant_message_with_thinking(
    thinking: dict[str, Any],
) -> None:
    assistant = {
        "role": "assistant",
        "content": [
            thinking,
            {"type": "text", "text": "a", "cache_control": CACHE},
            {"type": "tool_use", "id": "t", "name": "dump", "input": {}, "cache_control": CACHE},
        ],
    }
    marked = [{"type": "text", "text": str(i), "cache_control": CACHE} for i in range(4)]
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "go"},
            assistant,
            result_message(result("t", "x")),
            {"role": "user", "content": marked},
        ],
    }
    rendered = WIRE.render(body, WIRE.items(body), [])
    assert rendered["messages"][1] == assistant  # the earliest markers, yet kept
    user_marks = [b for b in rendered["messages"][3]["content"] if "cache_control" in b]
    assistant_marks = sum("cache_control" in b for b in assistant["content"])
    assert len(user_marks) == 4 - assistant_marks
    assert count_marks(rendered) == 4


def test_a_result_with_an_image_is_never_rewritten() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    (item,) = WIRE.items({"messages": [result_message(result("t1", [image]))]})
    assert WIRE.result_text(item) is None and WIRE.item_text(item) is None


def test_tool_names_resolve_within_the_exchange() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
        },
        result_message(result("t1", "out")),
    ]
    items = WIRE.items({"messages": messages})
    unit = Unit(0, 2, "tool_exchange", ("t1",))
    assert WIRE.tool_names(items, [unit]) == {1: "bash"}


def test_render_joins_parts_adds_tools_and_caps_cache_marks() -> None:
    marked = [{"type": "text", "text": str(i), "cache_control": CACHE} for i in range(6)]
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": marked}, result_message(result("t", "x"))],
        "tools": [{"name": "dump", "input_schema": {}}],
    }
    items = WIRE.items(body)
    added = WIRE.synthetic_tools(tool_specs(1000))
    rendered = WIRE.render(body, items, added)
    assert PART_KEY not in str(rendered)
    assert [t["name"] for t in rendered["tools"]] == [
        "dump",
        "read_context_artifact",
        "search_context_artifact",
    ]
    assert set(added[0]) == {"name", "description", "input_schema"}
    kept = [b for b in rendered["messages"][0]["content"] if "cache_control" in b]
    assert [b["text"] for b in kept] == ["2", "3", "4", "5"]  # the latest four stay
    assert all("cache_control" in b for b in marked)  # the client's blocks are untouched


def test_overhead_counts_system_tools_and_choice() -> None:
    counter = counter_for("x", "estimate")
    bare = WIRE.overhead_tokens({}, counter)
    system = WIRE.overhead_tokens({"system": "You are a careful assistant. " * 20}, counter)
    blocks = WIRE.overhead_tokens(
        {"system": [{"type": "text", "text": "You are a careful assistant. " * 20}]}, counter
    )
    assert bare < system and bare < blocks
    assert WIRE.overhead_tokens({}, counter, added_tools=[{"name": "r", "input_schema": {}}]) > bare


def test_notice_is_a_user_message_whatever_the_role() -> None:
    assert WIRE.notice_item("system", "n") == {"role": "user", "content": "n"}


def test_canonical_ignores_nulls_and_part_positions() -> None:
    a = {"role": "assistant", "content": [{"type": "text", "text": "x", "citations": None}]}
    b = {"role": "assistant", "content": [{"type": "text", "text": "x"}]}
    assert WIRE.canonical(a) == WIRE.canonical(b)
    assert WIRE.is_answer(a) and not WIRE.is_answer({"role": "user"})


def test_canonical_ignores_cache_marks_and_a_string_is_its_text_block() -> None:
    mark = {"type": "ephemeral"}
    marked = {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": mark}]}
    plain = {"role": "user", "content": "x", "cache_control": None}
    assert WIRE.canonical(marked) == WIRE.canonical(plain)
    assert WIRE.canonical(plain) != WIRE.canonical({"role": "user", "content": "y"})
    assert WIRE.canonical(plain) != WIRE.canonical({"role": "system", "content": "x"})


def test_pin_facts() -> None:
    (item,) = WIRE.items({"messages": [result_message(result("t", "found it"))]})
    assert WIRE.pin_facts(item) == ("user", None, "found it", True)
    assert WIRE.pin_facts({"role": "user", "content": "hi"}) == ("user", None, "hi", False)
