"""summarize with a model (`summarizer.kind: llm`): made while the request waits when there is
no background, else started (or found running) in the background and waited for; every failure
goes to `on_error` (mutation run 4; the end-to-end behaviour is in
tests/engine/test_preparer_compact.py and test_preparer_precompute.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from context_harness import counter

from proxy.artifacts.store import MemoryStore
from proxy.engine.step_api import Cut, StepServices
from proxy.engine.steps.summarize import Summarize, model_summary
from proxy.engine.steps.summarize import cache as summary_cache
from proxy.engine.steps.summarize.background import Background
from proxy.engine.steps.summarize.spans import RollUp, split
from proxy.engine.steps.summarize.summarizer import SummarizerError, SummaryCall, SummaryReply
from proxy.errors import ProxyError
from tests.engine.steps.summarize.test_model_summary import Recording
from tests.engine.steps.summarize.test_step import SCOPE, summarize_ctx

UNITS = [0, 1, 2, 3, 4]  # u0 is protected: units 1-4 are dropped


class Failing:
    def __init__(self) -> None:
        self.calls = 0

    async def summarize(self, call: SummaryCall) -> SummaryReply:
        self.calls += 1
        raise SummarizerError("invalid", "not JSON")


def llm(**summarizer: Any) -> tuple[Any, Summarize]:
    return summarize_ctx(  # every cut a roll-up (summary_spans has the roll-ups' own tests)
        summarizer={"kind": "llm", "model": "m", **summarizer}, roll_up_turns=0, roll_up_after=0
    )


def settle(
    step: Summarize,
    ctx: Any,
    summarizer: Any,
    background: Background | None = None,
    store: MemoryStore | None = None,
    cuts: list[Cut] | None = None,
) -> model_summary.Obtained:
    services = StepServices(
        store or MemoryStore(b"k"), SCOPE, counter(), summarizer=summarizer, background=background
    )
    asyncio.run(step.settle(ctx, UNITS, services, cuts if cuts is not None else [(4, 5)]))
    assert step.obtained is not None
    return step.obtained


def test_the_previous_cuts_units_are_those_before_its_horizon() -> None:
    ctx, _ = llm()
    every = RollUp(0, 0)  # every cut a roll-up: the previous summary is the previous cut's
    assert split(ctx, [1, 2, 3, 4], [(2, 3), (4, 5)], every).previous == [1, 2]
    assert split(ctx, [1, 2, 3, 4], [(1, 1), (2, 3), (4, 5)], every).previous == [1, 2]
    assert split(ctx, [1, 2, 3, 4], [(4, 5)], every).previous == []


def test_without_a_background_the_summary_is_made_while_the_request_waits() -> None:
    ctx, step = llm(upstream="cheap", batch_tokens=5_000)
    summarizer = Recording()
    obtained = settle(step, ctx, summarizer, cuts=[(2, 3), (4, 5)])
    assert (obtained.source, obtained.usage, obtained.failure) == (
        "fresh",
        {"prompt_tokens": 7},
        None,
    )
    assert obtained.summary is not None and obtained.summary.body.endswith("- f: v1")
    [call] = summarizer.calls
    assert call.transcript == "\n".join(model_summary.transcript(ctx, [1, 2, 3, 4]))
    assert (call.model, call.upstream, call.max_tokens) == ("m", "cheap", step.budget(ctx))
    assert step.model_settings(ctx) == model_summary.ModelSettings(
        "m", "cheap", step.budget(ctx), 10.0, 5_000
    )


@pytest.mark.parametrize(("on_error", "by"), [("extract", "extract"), ("drop", None)])
def test_a_failure_without_a_background_goes_to_on_error(on_error: str, by: str | None) -> None:
    ctx, step = llm(on_error=on_error)
    obtained = settle(step, ctx, Failing())
    assert (obtained.source, obtained.failure) == ("fallback", "invalid")
    assert (obtained.summary.by if obtained.summary else None) == by
    if obtained.summary is not None:
        assert obtained.summary == step._extract(ctx, [1, 2, 3, 4], "", step.budget(ctx))


def test_on_error_refuse_refuses_naming_the_failure() -> None:
    ctx, step = llm(on_error="refuse")
    with pytest.raises(ProxyError) as caught:
        settle(step, ctx, Failing())
    assert "could not be summarized (invalid: not JSON)" in str(caught.value)


def test_a_summary_running_ahead_is_waited_for_and_reported_as_such() -> None:
    ctx, step = llm()

    async def go() -> model_summary.Obtained:
        store, background = MemoryStore(b"k"), Background()
        background.bind(asyncio.get_running_loop())
        services = StepServices(
            store, SCOPE, counter(), summarizer=Recording(0.05), background=background
        )
        settings = step._in_background(step.model_settings(ctx))
        assert await model_summary.start_in_background(
            ctx, services, settings, [([1, 2, 3, 4], [])], counter().count_text
        )
        await step.settle(ctx, UNITS, services, [(4, 5)])
        assert step.obtained is not None
        return step.obtained

    began = time.monotonic()
    obtained = asyncio.run(go())
    assert (obtained.source, obtained.usage) == ("background", {"prompt_tokens": 7})
    assert obtained.summary is not None and obtained.summary.body.endswith("- f: v1")
    assert 0.0 < obtained.seconds <= time.monotonic() - began  # its wait, within the call


def test_a_span_that_just_failed_in_the_background_falls_back_with_that_failure() -> None:
    ctx, step = llm()

    async def go() -> tuple[model_summary.Obtained, int]:
        store, background, failing = MemoryStore(b"k"), Background(), Failing()
        background.bind(asyncio.get_running_loop())
        services = StepServices(store, SCOPE, counter(), summarizer=failing, background=background)
        await step.settle(ctx, UNITS, services, [(4, 5)])  # started, waited for, failed
        await background.drain()
        await step.settle(ctx, UNITS, services, [(4, 5)])  # the failure is remembered
        assert step.obtained is not None
        return step.obtained, failing.calls

    obtained, calls = asyncio.run(go())
    assert (obtained.source, obtained.failure, calls) == ("fallback", "invalid", 1)


@pytest.mark.parametrize("on_error", ["extract", "refuse"])
def test_a_summary_another_replica_is_making_is_not_waited_for(on_error: str) -> None:
    ctx, step = llm(on_error=on_error)

    async def go() -> model_summary.Obtained:
        store, background = MemoryStore(b"k"), Background()
        background.bind(asyncio.get_running_loop())
        services = StepServices(
            store, SCOPE, counter(), summarizer=Recording(), background=background
        )
        key = model_summary.span_key(ctx, step.model_settings(ctx), [1, 2, 3, 4])
        own = summary_cache.summaries_scope(SCOPE)
        assert await store.claim(own, f"making:{key}", ttl_seconds=60)
        await step.settle(ctx, UNITS, services, [(4, 5)])
        assert step.obtained is not None
        return step.obtained

    if on_error == "refuse":
        with pytest.raises(ProxyError) as caught:
            asyncio.run(go())
        message = "could not be summarized (timeout: the summary is being made elsewhere)"
        assert message in str(caught.value)
        return
    obtained = asyncio.run(go())
    assert (obtained.source, obtained.failure) == ("fallback", "timeout")
