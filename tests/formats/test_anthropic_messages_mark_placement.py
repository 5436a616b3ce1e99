"""Where the proxy puts Anthropic cache breakpoints (`cache_marks: auto | keep | off`)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES
from proxy.formats.anthropic_messages.cache_marks import MAX_CACHE_BREAKPOINTS, count_marks
from proxy.formats.anthropic_messages.items import split
from proxy.formats.anthropic_messages.mark_placement import cache_marks
from proxy.jsonio import dumps

MARK = {"type": "ephemeral"}
TOOLS = [
    {"name": "bash", "description": "run", "input_schema": {"type": "object"}},
    {"name": "read", "description": "read", "input_schema": {"type": "object"}},
]
THINKING = {"type": "thinking", "thinking": "let me see", "signature": "sig=="}


def tool_use(n: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": "bash", "input": {"command": "ls"}}


def tool_result(n: int) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"output {n}"}


def agent_body(exchanges: int, *, system: Any = "You are careful.") -> dict[str, Any]:
    """A task, then `exchanges` tool calls each answered by its result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the tests."}]
    for n in range(exchanges):
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"},
                                                         tool_use(n)]})  # fmt: skip
        messages.append({"role": "user", "content": [tool_result(n)]})
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": TOOLS,
                            "messages": messages}  # fmt: skip
    if system is not None:
        body["system"] = system
    return body


def marked_paths(body: dict[str, Any]) -> list[str]:
    """Every breakpoint of a body, as a path."""
    paths = [f"tools[{i}]" for i, t in enumerate(body.get("tools") or []) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        paths += [f"system[{i}]" for i, b in enumerate(system) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        for j, block in enumerate(content if isinstance(content, list) else []):
            if "cache_control" in block:
                paths.append(f"messages[{i}].content[{j}]")
    return paths


def test_auto_marks_system_the_previous_request_end_and_the_last_message() -> None:
    body = agent_body(3)
    before = copy.deepcopy(body)
    marks = cache_marks(body, "auto", 0)
    assert marks.body is not None
    # the last answer is messages[5]: the previous request ended with messages[4]
    expected = ["system[0]", "messages[4].content[0]", "messages[6].content[0]"]
    assert list(marks.placed) == expected == marked_paths(marks.body)
    assert marks.body["system"] == [{"type": "text", "text": "You are careful.",
                                     "cache_control": MARK}]  # fmt: skip
    assert marks.client == 0 and marks.removed == 0
    assert marks.through_items == len(split(body["messages"]))
    assert body == before  # the client's objects are never changed


def test_without_system_the_last_tool_is_marked() -> None:
    marks = cache_marks(agent_body(1, system=None), "auto", 0)
    assert marks.body is not None
    assert marks.placed[0] == "tools[1]" and marks.body["tools"][1]["cache_control"] == MARK
    assert "cache_control" not in marks.body["tools"][0]


def test_a_system_as_blocks_gets_its_last_non_empty_block_marked() -> None:
    system = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"},
              {"type": "text", "text": ""}]  # fmt: skip
    marks = cache_marks(agent_body(1, system=system), "auto", 0)
    assert marks.body is not None and marks.placed[0] == "system[1]"
    assert marks.body["system"][1] == {"type": "text", "text": "two", "cache_control": MARK}
    assert system[1] == {"type": "text", "text": "two"}


def test_every_string_content_becomes_its_text_block_so_bytes_stay_put_across_turns() -> None:
    body = agent_body(0)
    body["messages"] += [{"role": "assistant", "content": "Done."},
                         {"role": "user", "content": "Now the docs."}]  # fmt: skip
    marks = cache_marks(body, "auto", 0)
    assert marks.body is not None
    assert all(isinstance(m["content"], list) for m in marks.body["messages"])
    assert marks.body["messages"][1]["content"] == [{"type": "text", "text": "Done."}]
    assert list(marks.placed) == ["system[0]", "messages[0].content[0]", "messages[2].content[0]"]


def test_the_proxys_notice_is_marked_where_it_stands() -> None:
    body = agent_body(4)
    notice = {"role": "user", "content": "[ctxproxy#1: 6 turns dropped]"}
    body["messages"] = [body["messages"][0], notice, *body["messages"][5:]]
    marks = cache_marks(body, "auto", 2)  # the task and the notice lead
    assert marks.body is not None
    assert "messages[1].content[0]" in marks.placed
    assert marks.body["messages"][1]["content"] == [
        {"type": "text", "text": notice["content"], "cache_control": MARK}
    ]
    assert len(marks.placed) == MAX_CACHE_BREAKPOINTS == count_marks(marks.body)


def test_stable_items_count_result_parts_as_the_engine_does() -> None:
    body = agent_body(2)
    body["messages"][2]["content"] = [tool_result(0), {"type": "text", "text": "and"}]
    items = split(body["messages"])
    stable = items.index(body["messages"][3]) + 1  # through the second answer
    marks = cache_marks(body, "auto", stable)
    assert "messages[3].content[1]" in marks.placed


def test_an_assistant_message_with_thinking_is_never_changed() -> None:
    body = agent_body(2)
    body["messages"][3]["content"].insert(0, THINKING)
    prefill = [THINKING, {"type": "text", "text": "Prefill"}]
    body["messages"].append({"role": "assistant", "content": prefill})
    marks = cache_marks(body, "auto", 0)
    assert marks.body is not None
    # the last message (an answer with thinking) gives its breakpoint to the one before it
    assert "messages[4].content[0]" in marks.placed
    for index in (3, 5):
        assert marks.body["messages"][index] is body["messages"][index]
    assert all(not p.startswith(("messages[3]", "messages[5]")) for p in marks.placed)


def test_a_body_with_client_marks_keeps_them_under_auto_and_keep() -> None:
    body = agent_body(2)
    body["messages"][2]["content"][0] = {**tool_result(0), "cache_control": MARK}
    for mode in ("auto", "keep"):
        marks = cache_marks(body, mode, 0)
        assert marks.body is None and marks.placed == ()
        assert marks.client == 1 and marks.through_items == len(split(body["messages"][:3]))


def test_keep_adds_nothing() -> None:
    marks = cache_marks(agent_body(2), "keep", 0)
    assert marks.body is None and marks.client == 0 and marks.through_items is None


def test_off_removes_every_mark_but_in_thinking_answers() -> None:
    body = agent_body(2, system=[{"type": "text", "text": "sys", "cache_control": MARK}])
    body["tools"] = [{**TOOLS[0], "cache_control": MARK}]
    body["messages"][2]["content"] = [{**tool_result(0), "content": [
        {"type": "text", "text": "inner", "cache_control": MARK}]}]  # fmt: skip
    body["messages"][3]["content"] = [THINKING, {"type": "text", "text": "x",
                                                 "cache_control": MARK}]  # fmt: skip
    before = copy.deepcopy(body)
    marks = cache_marks(body, "off", 0)
    assert marks.body is not None and body == before
    assert marks.client == 4 and marks.removed == 3
    assert count_marks(marks.body) == 1 and marks.body["messages"][3] is body["messages"][3]
    assert cache_marks(agent_body(1), "off", 0).body is None  # nothing to remove


def test_at_most_four_marks_and_never_on_an_empty_text() -> None:
    body = agent_body(3)
    body["messages"][-1]["content"].append({"type": "text", "text": ""})
    notice = {"role": "user", "content": "[ctxproxy#1: dropped]"}
    body["messages"].insert(1, notice)
    marks = cache_marks(body, "auto", 2)
    assert marks.body is not None and count_marks(marks.body) <= MAX_CACHE_BREAKPOINTS
    assert f"messages[{len(body['messages']) - 1}].content[0]" in marks.placed


def test_the_same_history_gets_the_same_marks_and_they_stay_across_two_turns() -> None:
    first = agent_body(3)
    again = cache_marks(copy.deepcopy(first), "auto", 0)
    once = cache_marks(first, "auto", 0)
    assert once.body is not None and again.body is not None
    assert dumps(once.body) == dumps(again.body)
    second = agent_body(4)  # the next request: one more answer and result
    later = cache_marks(second, "auto", 0)
    assert later.body is not None
    # the block that ended the first request is where the second marks the previous end
    assert "messages[6].content[0]" in once.placed and "messages[6].content[0]" in later.placed
    assert once.body["messages"][6] == later.body["messages"][6]


def test_openai_formats_have_no_breakpoints() -> None:
    from proxy.formats import FORMATS

    for name in ("openai_chat", "openai_responses"):
        assert FORMATS[name].cache_marks({"messages": []}, "auto", 0) is None
    assert ANTHROPIC_MESSAGES.cache_marks(agent_body(1), "auto", 0) is not None


@given(exchanges=st.integers(0, 12), stable=st.integers(0, 6), thinking=st.booleans())
def test_auto_never_places_more_than_four_nor_touches_thinking(
    exchanges: int, stable: int, thinking: bool
) -> None:
    body = agent_body(exchanges)
    if thinking:
        for message in body["messages"]:
            if message["role"] == "assistant":
                message["content"].insert(0, THINKING)
    stable = min(stable, len(split(body["messages"])))
    marks = cache_marks(body, "auto", stable)
    assert marks.body is not None
    assert count_marks(marks.body) == len(marks.placed) <= MAX_CACHE_BREAKPOINTS
    for before, after in zip(body["messages"], marks.body["messages"], strict=True):
        if before["role"] == "assistant" and thinking:
            assert after is before
    assert dumps(cache_marks(copy.deepcopy(body), "auto", stable).body) == dumps(marks.body)
