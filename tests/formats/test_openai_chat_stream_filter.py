"""StreamFilter on hand-made chunks: the wire's odd but legal shapes (several choices, missing
indices, junk entries, a finish chunk without a delta, logprobs, Azure's empty `choices`)."""

from __future__ import annotations

import copy
from typing import Any

from proxy.formats.openai_chat.stream import StreamFilter, SyntheticCall

READ = "read_context_artifact"
BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
# whole tool-call deltas: the proxy's read call at index 0, a client's call at index 1
READ_CALL = {"index": 0, "id": "r", "function": {"name": READ, "arguments": "{}"}}
LS_CALL = {"index": 1, "id": "l", "function": {"name": "ls", "arguments": "{}"}}


def chunk(*choices: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**BASE, "choices": list(choices), **extra}


def choice(
    delta: dict[str, Any] | None = None, finish: str | None = None, index: int = 0, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "finish_reason": finish, **extra}
    if delta is not None:
        out["delta"] = delta
    return out


def calls(*deltas: Any) -> dict[str, Any]:
    return {"tool_calls": list(deltas)}


def started(loop_allowed: bool = True) -> StreamFilter:
    stream = StreamFilter()
    stream.start_round(loop_allowed=loop_allowed)
    return stream


def process(stream: StreamFilter, value: dict[str, Any]) -> dict[str, Any] | None:
    return stream.process(copy.deepcopy(value))


def test_chunks_the_filter_has_nothing_to_do_with_pass_as_they_are() -> None:
    stream = started()
    azure_first = chunk(prompt_filter_results=[{"prompt_index": 0}])
    no_choices = {**BASE, "system_fingerprint": "fp"}
    empty_delta = chunk(choice({}))
    no_delta = chunk(choice(None))
    for value in (azure_first, no_choices, empty_delta, no_delta):
        assert process(stream, value) == value


def test_a_missing_tool_call_index_is_index_0() -> None:
    stream = started()
    first = {
        "index": 0,
        "id": "call_r",
        "type": "function",
        "function": {"name": READ, "arguments": ""},
    }
    assert process(stream, chunk(choice(calls(first)))) is None
    rest = {"function": {"arguments": '{"artifact_id": "art_1"}'}}  # no index, as some servers
    no_index = {**BASE, "choices": [{"delta": calls(rest), "finish_reason": None}]}
    assert process(stream, no_index) is None
    assert process(stream, chunk(choice({}, "tool_calls"))) is None
    arguments = rest["function"]["arguments"]
    assert stream.pending_calls() == (None, [SyntheticCall("call_r", READ, arguments)])


def test_synthetic_call_named_after_its_id_and_text_in_pieces() -> None:
    stream = started()
    for text in ("Let me ", "look."):
        assert process(stream, chunk(choice({"content": text}))) is not None
    assert process(stream, chunk(choice(calls({"index": 0, "id": "call_r"})))) is None
    named = {"index": 0, "function": {"name": READ, "arguments": "{}"}}
    assert process(stream, chunk(choice(calls(named)))) is None
    finish = process(stream, chunk(choice({}, "tool_calls")))
    assert finish is None
    assert stream.pending_calls() == ("Let me look.", [SyntheticCall("call_r", READ, "{}")])


def test_two_choices_keep_their_own_calls_and_never_loop() -> None:
    stream = started()
    ls = {"index": 0, "id": "l", "function": {"name": "ls", "arguments": "{}"}}
    out = process(stream, chunk(choice(calls(READ_CALL), index=0), choice(calls(ls), index=1)))
    assert out == chunk(choice(calls(ls), index=1))
    done = process(
        stream, chunk(choice({}, "tool_calls", index=0), choice({}, "tool_calls", index=1))
    )
    assert done == chunk(choice({}, "stop", index=0), choice({}, "tool_calls", index=1))
    assert stream.pending_calls() is None


def test_client_calls_numbered_in_order_past_junk_and_calls_still_unnamed() -> None:
    stream = started()
    b = {"index": 1, "id": "b", "function": {"name": "ls", "arguments": ""}}
    c = {"index": 2, "id": "c", "function": {"name": "cat", "arguments": ""}}
    out = process(stream, chunk(choice(calls("junk", {"index": 0, "id": "a"}, b, c))))
    assert out == chunk(choice(calls({**b, "index": 0}, {**c, "index": 1})))
    done = process(stream, chunk(choice(None, "tool_calls")))
    assert done == chunk(choice(calls({"index": 2, "id": "a"}), "tool_calls"))


def test_unnamed_calls_flushed_into_the_finish_chunk_keep_its_delta() -> None:
    stream = started()
    for held in ({"index": 0, "id": "a"}, {"index": 1, "id": "b"}):
        assert process(stream, chunk(choice(calls(held)))) is None
    c = {"index": 2, "id": "c", "function": {"name": "ls", "arguments": "{}"}}
    done = process(stream, chunk(choice({"content": "Done.", **calls(c)}, "tool_calls")))
    flushed = [{**c, "index": 0}, {"index": 1, "id": "a"}, {"index": 2, "id": "b"}]
    assert done == chunk(choice({"content": "Done.", **calls(*flushed)}, "tool_calls"))


def test_later_round_drops_its_empty_role_chunk_unless_it_carries_logprobs() -> None:
    stream = started()
    process(stream, chunk(choice({"role": "assistant", "content": None})))
    process(stream, chunk(choice(calls(READ_CALL))))
    process(stream, chunk(choice({}, "tool_calls")))
    assert stream.pending_calls() is not None
    stream.start_round(loop_allowed=True)
    role = {"role": "assistant", "content": ""}
    assert process(stream, chunk(choice(role))) is None
    logprobs = {"content": [{"token": "", "logprob": 0.0}]}
    kept = process(stream, chunk(choice(role, logprobs=logprobs)))
    assert kept == chunk(choice({"content": ""}, logprobs=logprobs))


def test_usage_on_a_content_chunk_is_held_back_and_summed() -> None:
    stream = started()
    usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    out = process(stream, chunk(choice({"content": "Hi"}, "stop"), usage=usage))
    assert out == chunk(choice({"content": "Hi"}, "stop"), usage=None)
    assert stream.usage_chunk() == chunk(usage=usage)


def test_a_mixed_rounds_synthetic_calls_are_given_back_for_execution() -> None:
    stream = started()
    assert process(stream, chunk(choice(calls(READ_CALL, LS_CALL)))) == chunk(
        choice(calls({**LS_CALL, "index": 0}))
    )
    assert process(stream, chunk(choice({}, "tool_calls"))) == chunk(choice({}, "tool_calls"))
    assert stream.pending_calls() is None
    assert stream.mixed_synthetic_calls() == [SyntheticCall("r", READ, "{}").as_tool_call()]


def test_a_mixed_round_of_several_choices_gives_no_synthetic_calls_back() -> None:
    stream = started()
    both = calls(READ_CALL, LS_CALL)
    process(stream, chunk(choice(both, index=0), choice(both, index=1)))
    process(stream, chunk(choice({}, "tool_calls", index=0), choice({}, "tool_calls", index=1)))
    assert stream.pending_calls() is None
    assert stream.mixed_synthetic_calls() == []
