"""`proxy.completion.run`: the upstream's reported prompt tokens feed the count calibration, for
the upstream that answered, the model and the requester's contributor."""

from __future__ import annotations

from dataclasses import replace

from completion_harness import (
    answer,
    chunk,
    drain,
    make_context,
    prepared,
    read_call,
    stored,
    usage_chunk,
)
from upstream_double import UpstreamDouble, json_answer, sse_answer

from proxy.artifacts.store import MemoryStore
from proxy.completion.run import run_completion
from proxy.engine.manifest import Prepared
from proxy.tokens.calibration import CountCalibration, KeySnapshot
from proxy.tokens.calibration_rule import AppliedRatio, CalibrationKey, RatioRule, RatioSource

KEY = CalibrationKey("fake", "gpt-4o")  # the upstream double's name, the request's model


def counted(request: Prepared, tokens: int = 1000) -> Prepared:
    request.manifest.counting_method = "tiktoken:o200k_base"
    request.manifest.tokens_after = tokens
    return request


async def run(
    upstream: UpstreamDouble, request: Prepared, store: MemoryStore | None = None, who: str = "c"
) -> CountCalibration:
    calibration = CountCalibration(RatioRule(min_samples=1, step=10.0))  # steps never bind
    context = replace(make_context(upstream, store), calibration=calibration, contributor=who)
    reply = await run_completion(context, request)
    if reply.stream is not None:
        await drain(reply)
    return calibration


async def test_a_relayed_answer_calibrates_its_model() -> None:
    upstream = UpstreamDouble(json_answer(answer("hi", tokens=(1100, 3))))
    calibration = await run(upstream, counted(prepared(None)))
    assert calibration.snapshot() == {KEY: KeySnapshot(1.0, 1, 1)}
    assert calibration.applied(KEY, "c") == AppliedRatio(1.1, RatioSource.own)
    assert calibration.applied(KEY, "another") == AppliedRatio()


async def test_only_the_first_round_of_the_read_loop_calibrates() -> None:
    store = MemoryStore(b"secret")
    artifact_id = await stored(store, "the log")
    upstream = UpstreamDouble(
        json_answer(answer(None, read_call("s1", artifact_id), tokens=(1200, 5))),
        json_answer(answer("done", tokens=(3000, 5))),  # a longer prompt: the round appended
    )
    calibration = await run(upstream, counted(prepared(2)), store)
    assert len(upstream.calls) == 2
    assert calibration.snapshot() == {KEY: KeySnapshot(1.0, 1, 1)}
    assert calibration.applied(KEY, "c") == AppliedRatio(1.2, RatioSource.own)


async def test_streams_errors_and_uncounted_requests_do_not_calibrate() -> None:
    stream = sse_answer([chunk({"content": "hi"}), usage_chunk(1100, 1)])
    calibration = await run(UpstreamDouble(stream), counted(prepared(None, stream=True)))
    assert calibration.snapshot() == {}
    error = json_answer({"error": {"message": "x", "usage": {"prompt_tokens": 9}}}, status=400)
    assert (await run(UpstreamDouble(error), counted(prepared(None)))).snapshot() == {}
    plain = UpstreamDouble(json_answer(answer("hi", tokens=(1100, 3))))
    uncounted = prepared(None)  # mode: off counts nothing
    uncounted.manifest.tokens_after = 1000
    assert (await run(plain, uncounted)).snapshot() == {}
    plain = UpstreamDouble(json_answer(answer("hi", tokens=(1100, 3))))
    assert (await run(plain, counted(prepared(None)), who="")).snapshot() == {}  # no credential
