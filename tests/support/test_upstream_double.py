"""`upstream_double.UpstreamDouble`: the in-memory upstream the completion tests stand on."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict
from upstream_double import Answer, Call, UpstreamDouble, broken, json_answer, sse_answer

from proxy.stats import RequestStats
from proxy.upstream.base import Upstream, UpstreamError

HEADERS = CIMultiDict({"X-Tag": "t"})


def as_upstream(fake: UpstreamDouble) -> Upstream:
    return fake  # checked by mypy: the double satisfies the protocol


async def test_calls_are_recorded_and_answers_given_in_order() -> None:
    fake = UpstreamDouble(json_answer({"n": 1}), json_answer(b"raw", status=201))
    stats = RequestStats()
    first = await as_upstream(fake).send(headers=HEADERS, body=b'{"a": 1}', timer=stats)
    second = await fake.open("GET", "/models", headers=HEADERS, body=None, query="x=1")
    assert fake.calls == [
        Call("POST", "/chat/completions", HEADERS, b'{"a": 1}'),
        Call("GET", "/models", HEADERS, None, "x=1"),
    ]
    assert fake.calls[0].json() == {"a": 1}
    assert (first.status, await first.read()) == (200, b'{"n": 1}')
    assert (second.status, await second.read()) == (201, b"raw")
    assert first.headers["content-type"] == "application/json" and not first.is_event_stream
    assert not fake.all_closed
    first.close()
    second.close()
    assert fake.all_closed
    assert [c.upstream for c in stats.upstream_calls] == ["fake"]


async def test_chunks_then_the_scripted_break() -> None:
    fake = UpstreamDouble(sse_answer([{"n": 1}, b"data: x\n\n"], done=False, error=broken()))
    response = await fake.send(headers=HEADERS, body=b"{}")
    assert response.is_event_stream
    received = []
    with pytest.raises(UpstreamError):
        async for chunk in response.chunks():
            received.append(chunk)
    assert received == [b'data: {"n": 1}\n\n', b"data: x\n\n"]


async def test_a_whole_body_can_break_too() -> None:
    fake = UpstreamDouble(Answer(body=b"{", error=broken()))
    response = await fake.send(headers=HEADERS, body=b"{}")
    with pytest.raises(UpstreamError):
        await response.read()


async def test_reading_after_close_is_a_test_failure() -> None:
    fake = UpstreamDouble(json_answer({}))
    response = await fake.send(headers=HEADERS, body=b"{}")
    response.close()
    with pytest.raises(AssertionError):
        await response.read()


async def test_a_scripted_error_is_raised_by_the_call() -> None:
    error = broken("unreachable")
    fake = UpstreamDouble(error)
    stats = RequestStats()
    with pytest.raises(UpstreamError) as caught:
        await fake.send(headers=HEADERS, body=b"{}", timer=stats)
    assert caught.value is error
    assert stats.upstream_sent is not None and stats.upstream_calls == []
    assert len(fake.calls) == 1 and fake.responses == []


async def test_a_handler_answers_every_call() -> None:
    fake = UpstreamDouble(handler=lambda call: json_answer(call.body or b"empty"))
    for body in (b'{"a": 1}', b'{"b": 2}'):
        response = await fake.send(headers=HEADERS, body=body)
        assert await response.read() == body
    assert len(fake.calls) == 2


async def test_running_out_of_script_fails_the_test() -> None:
    fake = UpstreamDouble()
    with pytest.raises(AssertionError, match="no answer scripted"):
        await fake.send(headers=HEADERS, body=b"{}")
