"""Tests for proxy.formats.openai_chat.conversation.canonical_message: the bytes a message is
known by in history keys (the working set, the summary cache). Messages that say the same must
get the same bytes whatever an SDK adds or drops; messages that say something else must not."""

from __future__ import annotations

from typing import Any

from proxy.formats.openai_chat.conversation import canonical_message


def call(call_id: Any = "call_1", name: Any = "read_file", **extra: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": '{"path": "a.py"}'}
    return {"id": call_id, "type": "function", "function": function, **extra}


def asking(*tool_calls: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(tool_calls)}


def test_the_bytes_of_a_tool_call_message_are_stable() -> None:
    # history keys outlive a restart in Redis: these bytes must not change between versions
    message = {**asking(call()), "refusal": None}
    assert canonical_message(message) == (
        b'{"role":"assistant","tool_calls":[["call_1","read_file","{\\"path\\": \\"a.py\\"}"]]}'
    )


def test_messages_that_differ_only_in_role_or_tool_call_id_are_told_apart() -> None:
    hi = canonical_message({"role": "user", "content": "hi"})
    assert hi != canonical_message({"role": "system", "content": "hi"})
    first = canonical_message({"role": "tool", "tool_call_id": "a", "content": "ok"})
    assert first != canonical_message({"role": "tool", "tool_call_id": "b", "content": "ok"})


def test_tool_calls_that_differ_only_in_id_or_function_name_are_told_apart() -> None:
    assert canonical_message(asking(call("a"))) != canonical_message(asking(call("b")))
    read = canonical_message(asking(call(name="read_file")))
    assert read != canonical_message(asking(call(name="search")))


def test_fields_an_sdk_adds_to_a_tool_call_are_left_out() -> None:
    bare = {"id": "a", "function": {"name": "f", "arguments": "{}"}}
    full = {**bare, "type": "function", "index": 0}
    assert canonical_message(asking(full)) == canonical_message(asking(bare))


def test_an_empty_tool_calls_list_is_the_same_as_none() -> None:
    plain = {"role": "assistant", "content": "done"}
    assert canonical_message({**plain, "tool_calls": []}) == canonical_message(plain)


def test_a_message_that_is_not_an_object_is_known_by_its_own_json() -> None:
    assert canonical_message("hello") == b'"hello"'
    assert canonical_message(5) != canonical_message("5")
