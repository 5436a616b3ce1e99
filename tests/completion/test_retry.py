"""`proxy.completion.retry`: one tighter retry after an upstream's context-length error."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from completion_harness import answer, make_context, prepared
from upstream_double import Answer, UpstreamDouble, json_answer

from proxy.completion.reply import Reply
from proxy.completion.run import run_completion
from proxy.engine.manifest import Prepared
from proxy.errors import ErrorCode, ProxyError

OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


class Again:
    """The caller's `PrepareAgain`: records the windows (and stated prompt sizes) it is given,
    answers `result`."""

    def __init__(self, result: Prepared | None) -> None:
        self.result = result
        self.windows: list[int] = []
        self.prompts: list[int | None] = []

    async def __call__(self, window: int, prompt_tokens: int | None) -> Prepared | None:
        self.windows.append(window)
        self.prompts.append(prompt_tokens)
        return self.result


def shorter() -> Prepared:
    again = prepared(None, messages=[{"role": "user", "content": "short"}])
    again.manifest.tokens_after = 2
    return again


async def run(upstream: UpstreamDouble, first: Prepared, again: Again) -> Reply:
    context = replace(make_context(upstream), prepare_again=again)
    return await run_completion(context, first)


async def test_an_overflow_is_prepared_again_and_retried_once() -> None:
    upstream = UpstreamDouble(json_answer(OVERFLOW, status=400), json_answer(answer("fits")))
    again = Again(shorter())
    reply = await run(upstream, prepared(None), again)
    assert reply.status == 200 and again.windows == [8192] and again.prompts == [9000]
    assert [b["messages"][0]["content"] for b in upstream.bodies] == [
        "what was in the log?",
        "short",
    ]
    assert reply.headers["x-ctxproxy-tokens-after"] == "2"  # the retried request's manifest
    assert json.loads(reply.body or b"")["choices"][0]["message"]["content"] == "fits"
    assert all(r.closed for r in upstream.responses[:1])


async def test_a_second_overflow_is_relayed() -> None:
    upstream = UpstreamDouble(json_answer(OVERFLOW, status=400), json_answer(OVERFLOW, status=400))
    again = Again(shorter())
    reply = await run(upstream, prepared(None), again)
    assert (reply.status, again.windows, len(upstream.calls)) == (400, [8192], 2)


@pytest.mark.parametrize(
    "error",
    [
        json_answer({"error": {"message": "bad", "code": "context_length_exceeded"}}, status=400),
        json_answer({"error": {"message": "invalid tools", "code": None}}, status=400),
        json_answer(OVERFLOW, status=500),
    ],
)
async def test_other_errors_and_overflows_without_a_window_are_relayed(error: Answer) -> None:
    again = Again(shorter())
    reply = await run(UpstreamDouble(error), prepared(None), again)
    assert (reply.status, reply.body, again.windows) == (error.status, error.body, [])


async def test_nothing_to_change_relays_the_first_answer_byte_for_byte() -> None:
    padding = "x" * 400_000  # more than is read to look for a window, and streamed on
    body = json.dumps({**OVERFLOW, "padding": padding}).encode()
    chunks = [body[i : i + 10_000] for i in range(0, len(body), 10_000)]
    upstream = UpstreamDouble(Answer(400, {"Content-Type": "application/json"}, chunks=chunks))
    again = Again(None)
    reply = await run(upstream, prepared(None), again)
    assert again.windows == [8192] and reply.status == 400
    assert reply.stream is not None  # a large answer is streamed on, its first bytes first
    relayed = b"".join([c async for c in reply.stream])
    await reply.stream.aclose()
    assert relayed == body and len(upstream.calls) == 1


async def test_a_refused_preparation_closes_the_first_answer() -> None:
    async def refuse(window: int, prompt_tokens: int | None) -> Prepared | None:
        raise ProxyError(ErrorCode.context_length_exceeded, "does not fit")

    upstream = UpstreamDouble(json_answer(OVERFLOW, status=400))
    context = replace(make_context(upstream), prepare_again=refuse)
    with pytest.raises(ProxyError):
        await run_completion(context, prepared(None))
    assert upstream.responses[0].closed


async def test_the_synthetic_loop_retries_its_first_round_too() -> None:
    upstream = UpstreamDouble(json_answer(OVERFLOW, status=400), json_answer(answer("fits")))
    again = Again(shorter())
    reply = await run(upstream, prepared(2), again)
    assert reply.status == 200 and again.windows == [8192] and len(upstream.calls) == 2
    assert upstream.bodies[1]["messages"][0]["content"] == "short"


async def test_without_prepare_again_an_overflow_is_relayed(caplog: Any) -> None:
    upstream = UpstreamDouble(json_answer(OVERFLOW, status=400))
    reply = await run_completion(make_context(upstream), prepared(None))
    assert reply.status == 400 and len(upstream.calls) == 1
