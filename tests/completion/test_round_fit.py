"""Every follow-up call of the synthetic loop fits: unit tests of the fitting, and the property
over scripted read-happy upstreams with the real preparer and policy."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from completion_harness import answer, make_context, tool_call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pipeline_harness import TENANT, make_harness, write_policy
from shared_tokens import shared_counters
from upstream_double import Call, UpstreamDouble, json_answer

from proxy.completion.round_fit import fitted_call, shortening_steps
from proxy.completion.run import run_completion
from proxy.engine.manifest import Prepared
from proxy.engine.prepare_request import FOLLOW_UP
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.jsonio import dumps
from proxy.synthetic.base import CallStatus, ToolResult
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.search import SEARCH_TOOL
from proxy.tokens.counters import TokenCounters

ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")
BIG = "\n".join(f"line {i}: value={i * 7919 % 10007}" for i in range(1500))
POLICY = """
extends: default
budget: {context_window: 4000, default_reserved_output: 500}
steps: [{kind: offload_tool_results, threshold_chars: 2000}, {kind: clear_tool_results},
        {kind: drop_turns}]
read_tool: {max_rounds: 4}
"""


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


def page(chars: int) -> ToolResult:
    value = {
        "artifact_id": "art_x",
        "offset": 0,
        "content": "x" * chars,
        "next_offset": None,
        "total_chars": chars,
        "truncated": False,
        "untrusted_content": True,
    }
    return ToolResult(READ_TOOL, CallStatus.found, json.dumps(value), value)


def sized_refit(max_chars: int, calls: list[bool]) -> Any:
    """A refit that accepts bodies of at most `max_chars` JSON characters."""

    async def refit(body: dict[str, Any], raw: bytes, last_resort: bool) -> Prepared:
        calls.append(last_resort)
        if len(raw) > max_chars:
            raise ProxyError(ErrorCode.context_length_exceeded, "too long")
        return Prepared(raw, True, None, body)  # type: ignore[arg-type]

    return refit


def render(results: list[ToolResult]) -> dict[str, Any]:
    return {"messages": [r.text for r in results]}


def test_shortening_halves_the_longest_result_down_to_nothing() -> None:
    assert shortening_steps([page(1000), page(300)]) == [500, 250, 125, 0]
    assert shortening_steps([page(100)]) == [0]
    assert shortening_steps([]) == [0]


def test_limits_that_leave_more_text_than_the_allowance_can_hold_are_skipped() -> None:
    # 8 characters per token at most: an allowance of 50 tokens holds at most 400 characters
    assert shortening_steps([page(1000), page(300)], allowance=50) == [125, 0]
    assert shortening_steps([page(1000), page(300)], allowance=10_000) == [500, 250, 125, 0]


def test_the_limits_reach_the_smallest_shortening_and_a_ceiling_exactly_filled() -> None:
    assert shortening_steps([page(128)]) == [64, 0]
    # at most 128 characters each: 256 characters, exactly what 32 tokens hold
    assert shortening_steps([page(1024), page(300)], allowance=32) == [128, 64, 0]


async def test_results_that_cannot_fit_the_allowance_are_never_counted_whole() -> None:
    calls: list[bool] = []
    seen: list[int] = []
    refit = sized_refit(10_000, calls)

    async def recording(body: dict[str, Any], raw: bytes, last_resort: bool) -> Prepared:
        seen.append(len(raw))
        return await refit(body, raw, last_resort)

    fitted = await fitted_call(recording, render, dumps, [page(1000)], allowance=50)
    assert fitted is not None and len(seen) == 1
    assert [json.loads(r.text)["content"] for r in fitted.results] == ["x" * 250]


async def test_results_that_exactly_fill_the_allowance_are_sent_whole() -> None:
    calls: list[bool] = []
    results = [page(600), page(400)]  # 1,000 characters: 125 tokens at 8 characters a token
    fitted = await fitted_call(sized_refit(10_000, calls), render, dumps, results, allowance=125)
    assert fitted is not None and fitted.results is results and calls == [False]


async def test_the_results_are_sent_whole_when_they_fit() -> None:
    calls: list[bool] = []
    results = [page(1000)]
    fitted = await fitted_call(sized_refit(10_000, calls), render, dumps, results)
    assert fitted is not None and fitted.results is results and calls == [False]


async def test_results_are_shortened_until_the_call_fits() -> None:
    calls: list[bool] = []
    # whole: 1,537 chars; at most 500 of text each: 1,168; at most 250: 918
    fitted = await fitted_call(sized_refit(1000, calls), render, dumps, [page(1000), page(200)])
    assert fitted is not None
    assert [json.loads(r.text)["content"] for r in fitted.results] == ["x" * 250, "x" * 200]
    assert len(fitted.body) <= 1000 and calls == [False, False, False]


async def test_the_last_resort_comes_only_with_results_that_carry_no_text() -> None:
    calls: list[bool] = []
    assert await fitted_call(sized_refit(10, calls), render, dumps, [page(1000)]) is None
    assert calls == [False, False, False, False, True]


async def test_other_errors_are_not_taken_for_a_call_that_does_not_fit() -> None:
    async def refit(body: dict[str, Any], raw: bytes, last_resort: bool) -> Prepared:
        raise ProxyError(ErrorCode.invalid_messages, "broken")

    with pytest.raises(ProxyError):
        await fitted_call(refit, render, dumps, [page(10)])


Script = list[list[tuple[str, int, int]]]
CALL = st.tuples(
    st.sampled_from([READ_TOOL, SEARCH_TOOL]), st.integers(0, 40_000), st.integers(1, 20_000)
)
SCRIPTS = st.lists(st.lists(CALL, min_size=1, max_size=50), min_size=1, max_size=5)
EXAMPLES = examples(30)


def read_happy(script: Script) -> UpstreamDouble:
    """Asks for each scripted round of calls in turn (naming the first artifact id it sees),
    then answers in words."""
    rounds = iter(script)

    def handle(call: Call) -> Any:
        found = ARTIFACT_ID.search(call.body.decode() if call.body else "")
        planned = next(rounds, None)
        if found is None or planned is None:
            return json_answer(answer("done"))
        calls = [
            tool_call(
                f"c{i}",
                name,
                {
                    "artifact_id": found.group(0),
                    "offset": offset,
                    "max_chars": chars,
                    "pattern": "value=1",
                },
            )
            for i, (name, offset, chars) in enumerate(planned)
        ]
        return json_answer(answer(None, *calls))

    return UpstreamDouble(handler=handle)


def request() -> dict[str, Any]:
    call = {"id": "call_dump", "type": "function", "function": {"name": "dump", "arguments": "{}"}}
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "What is the value on line 512?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_dump", "content": BIG},
        ],
    }


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=SCRIPTS)
async def test_no_upstream_call_of_a_request_exceeds_its_allowance(
    tmp_path: Path, counters: TokenCounters, script: Script
) -> None:
    write_policy(tmp_path, POLICY)
    harness = make_harness(tmp_path, counters)
    body = request()
    prepared = await harness.preparer.prepare(body, dumps(body), TENANT, OPENAI_CHAT)
    assert prepared.synthetic is not None, "the result was not offloaded"
    upstream = read_happy(script)

    async def refit(body: dict[str, Any], raw: bytes, last_resort: bool) -> Prepared:
        call = dataclasses.replace(FOLLOW_UP, last_resort=last_resort)
        return await harness.preparer.prepare(body, raw, TENANT, OPENAI_CHAT, call=call)

    base = make_context(upstream, harness.store)
    context = dataclasses.replace(base, scope=TENANT.scope, refit=refit)
    reply = await run_completion(context, prepared)
    assert reply.status == 200
    allowance = prepared.manifest.allowance
    counter = harness.counters.for_model("gpt-4o")
    sent = [call.json() for call in upstream.calls]
    assert 2 <= len(sent) <= min(len(script), 4) + 1
    counts = [counter.count_request(body) for body in sent]
    assert max(counts) <= allowance, (counts, allowance)
