"""Properties of the Responses `input` parser over generated item lists: it partitions any input,
keeps every call with its outputs and every reasoning item with the model's item it precedes,
and a well-formed Codex-like history always parses without problems."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.engine.conversation import Conversation
from proxy.formats.openai_responses.conversation import parse_conversation
from proxy.formats.openai_responses.fields import call_id_of, is_call, is_output, item_type

PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
IDS = st.sampled_from(["a", "b", "c"])

ITEM = st.one_of(
    st.just({"role": "user", "content": "q"}),
    st.just({"type": "message", "role": "developer", "content": "d"}),
    st.just({"type": "message", "role": "assistant", "content": "a"}),
    st.just({"type": "reasoning", "id": "rs", "encrypted_content": "e"}),
    st.just({"type": "web_search_call", "id": "ws", "status": "completed"}),
    IDS.map(lambda i: {"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"}),
    IDS.map(lambda i: {"type": "function_call_output", "call_id": i, "output": "o"}),
    IDS.map(lambda i: {"type": "custom_tool_call", "call_id": i, "name": "g", "input": "x"}),
    IDS.map(lambda i: {"type": "custom_tool_call_output", "call_id": i, "output": "o"}),
    st.just({"type": "item_reference", "id": "x"}),
    st.just("junk"),
)


def assert_partition(items: list[Any], conv: Conversation) -> None:
    pos = conv.system_end
    for turn in conv.turns:
        assert turn.start == pos and turn.units
        for unit in turn.units:
            assert unit.start == pos and unit.end > unit.start
            assert 1 <= unit.call_items <= unit.size
            pos = unit.end
        assert pos == turn.end
    assert pos == len(items)


@PROPERTY
@given(st.lists(ITEM, max_size=30))
def test_any_input_is_partitioned(items: list[Any]) -> None:
    conv = parse_conversation(items)
    assert_partition(items, conv)
    owner = conv.unit_by_message()
    for i, item in enumerate(items):
        if i >= conv.system_end and item_type(item) == "reasoning" and i + 1 < len(items):
            after = items[i + 1]
            model = item_type(after) in ("reasoning", "web_search_call") or is_call(after)
            if model or (isinstance(after, dict) and after.get("role") == "assistant"):
                assert owner[i] == owner[i + 1]  # reasoning stays with what it precedes
    if conv.ok:
        for i, item in enumerate(items):
            if is_output(item):
                unit = owner[i]
                assert unit is not None and call_id_of(item) in unit.tool_call_ids
                assert i in unit.result_indices


def turn(step: int, calls: int, with_reasoning: bool, parallel: bool) -> list[Any]:
    ids = [f"c{step}_{k}" for k in range(calls)]
    head: list[Any] = [{"role": "user", "content": f"step {step}"}]
    outputs = [{"type": "function_call_output", "call_id": i, "output": "o"} for i in ids]
    for call_id, output in zip(ids, outputs, strict=True):
        if with_reasoning:
            head.append({"type": "reasoning", "id": f"rs_{call_id}", "encrypted_content": "e"})
        head.append({"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"})
        if not parallel:
            head.append(output)
    return head + (outputs if parallel else []) + [{"role": "assistant", "content": "done"}]


@PROPERTY
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.booleans()), max_size=12))
def test_codex_like_histories_parse_cleanly(shape: list[tuple[int, bool, bool]]) -> None:
    items: list[Any] = [{"type": "message", "role": "developer", "content": "rules"}]
    for step, (calls, reasoning, parallel) in enumerate(shape):
        items += turn(step, calls, reasoning, parallel)
    conv = parse_conversation(items)
    assert conv.ok and conv.system_end == 1
    assert len(conv.user_turns) == len(shape)
    exchanges = [u for u in conv.units if u.is_tool_exchange]
    assert sum(len(u.tool_call_ids) for u in exchanges) == sum(c for c, _, _ in shape)
    for unit in exchanges:
        assert all(is_output(items[i]) for i in unit.result_indices)
        assert not any(is_output(items[i]) for i in range(unit.start, unit.start + unit.call_items))
