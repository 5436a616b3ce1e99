"""Never blocking: near its trigger a conversation's next summaries are made in the background,
so the request that crosses the trigger finds its summary frozen and makes no summarizer call;
a summary not ready within `timeout_s` is not waited for (fallback), and is used next time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pipeline_harness import Harness, agent_history, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.engine.manifest import Prepared
from proxy.engine.prepare_request import FIRST_CALL, FOLLOW_UP, CallOptions
from proxy.engine.steps.summarize.summarizer import SummarizerError, SummaryCall, SummaryReply
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.http.auth import Tenant

POLICY = """
mode: compact
budget: {{context_window: 8000, reserved_output: 1000, safety_margin: 0}}
steps:
  - {{kind: offload_tool_results, threshold_chars: 3000}}
  - {{kind: clear_tool_results}}
  - kind: summarize
    summarizer: {{kind: llm, max_summary_tokens: 300, timeout_s: {timeout}, precompute_at: {at}}}
"""
TENANT = Tenant(name="t", policy="test", scope="t:scope", upstream_key=None, passthrough=True)
HANG_S = 60.0
ANSWER = json.dumps({"facts": [{"name": "n", "value": "1"}], "decisions": [],
                     "open_questions": [], "resources": [], "errors": []})


class Recording:
    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[SummaryCall] = []
        self.delay = delay

    async def summarize(self, call: SummaryCall) -> SummaryReply:
        self.calls.append(call)
        await asyncio.sleep(self.delay)
        return SummaryReply(ANSWER, "sum-1", {"prompt_tokens": 10, "completion_tokens": 5})


def harness(tmp_path: Path, timeout: float = 5, at: str = "0.8", **options: Any) -> Harness:
    write_policy(tmp_path, POLICY.format(timeout=timeout, at=at))
    return make_harness(tmp_path, shared_counters(), **options)


async def prepare(h: Harness, turns: int, summarizer: Recording) -> Prepared:
    body = {"model": "gpt-4o", "messages": agent_history(turns, result_chars=800)}
    raw = json.dumps(body).encode()
    return await h.preparer.prepare(body, raw, TENANT, OPENAI_CHAT, summarizer=summarizer)


def summarized(prepared: Prepared) -> dict[str, Any] | None:
    for action in prepared.manifest.actions:
        if action.step == "summarize":
            return action.detail
    return None


async def test_the_request_crossing_the_trigger_finds_its_summary_made_ahead(
    tmp_path: Path,
) -> None:
    h, summarizer = harness(tmp_path), Recording()
    near = 0
    for turns in range(2, 60):
        before = len(summarizer.calls)
        prepared = await prepare(h, turns, summarizer)
        during = len(summarizer.calls) - before
        detail = summarized(prepared)
        if detail is None:
            if prepared.manifest.tokens_before >= 0.8 * prepared.manifest.trigger:
                near += 1
            await h.preparer.background.drain()
            continue
        assert near > 0  # some requests were near the trigger before this one crossed it
        assert before > 0  # ... and their summaries were made then, in the background
        assert during == 0  # the crossing request made no summarizer call itself
        assert detail["source"] in ("cache", "background")
        assert detail["by"] == "sum-1" and detail["kind"] == "llm"
        return
    raise AssertionError("the conversation never crossed its trigger")


async def test_without_precompute_the_crossing_request_calls_the_summarizer(
    tmp_path: Path,
) -> None:
    h, summarizer = harness(tmp_path, at="null"), Recording()
    for turns in range(2, 60):
        before = len(summarizer.calls)
        prepared = await prepare(h, turns, summarizer)
        detail = summarized(prepared)
        if detail is not None:
            assert before == 0 and len(summarizer.calls) > 0
            assert detail["source"] == "fresh"
            return
    raise AssertionError("the conversation never crossed its trigger")


class Held(Recording):
    """Writes each summary only once `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.written = 0

    async def summarize(self, call: SummaryCall) -> SummaryReply:
        self.calls.append(call)
        await self.release.wait()
        self.written += 1
        return SummaryReply(ANSWER, "sum-1", {"prompt_tokens": 10, "completion_tokens": 5})


async def test_a_slow_summary_is_not_waited_for_and_is_used_by_the_next_request(
    tmp_path: Path,
) -> None:
    h, summarizer = harness(tmp_path, timeout=0.05, at="null"), Held()
    for turns in range(2, 60):
        # HANG_S only bounds a preparation that waits for the held summary (a broken one)
        prepared = await asyncio.wait_for(prepare(h, turns, summarizer), HANG_S)
        detail = summarized(prepared)
        if detail is None:
            continue
        assert summarizer.calls and summarizer.written == 0  # answered while it was held
        assert detail["source"] == "fallback" and detail["failure"] == "timeout"
        assert detail["by"] == "extract"
        summarizer.release.set()
        await h.preparer.background.drain()  # the summary goes on and is frozen
        assert summarizer.written == len(summarizer.calls)  # each written once released
        again = summarized(await prepare(h, turns, summarizer))
        assert again is not None and again["source"] == "cache" and again["by"] == "sum-1"
        return
    raise AssertionError("the conversation never crossed its trigger")


class Failing(Recording):
    async def summarize(self, call: SummaryCall) -> SummaryReply:
        self.calls.append(call)
        raise SummarizerError("upstream", "down")


async def test_a_span_that_just_failed_is_neither_retried_nor_waited_for(tmp_path: Path) -> None:
    h, summarizer = harness(tmp_path, timeout=5, at="null"), Failing()
    for turns in range(2, 60):
        prepared = await prepare(h, turns, summarizer)
        detail = summarized(prepared)
        if detail is None:
            continue
        assert detail["source"] == "fallback" and detail["failure"] == "upstream"
        calls = len(summarizer.calls)
        again = summarized(await prepare(h, turns, summarizer))
        # the failure remembered, at once: not a wait for the 5 s timeout ("timeout")
        assert again is not None and again["source"] == "fallback"
        assert again["failure"] == "upstream"
        assert len(summarizer.calls) == calls  # not retried at once
        return
    raise AssertionError("the conversation never crossed its trigger")


async def test_between_roll_ups_nothing_is_summarized_and_the_roll_up_finds_its_summary(
    tmp_path: Path,
) -> None:
    h, summarizer = harness(tmp_path), Recording()
    first: int | None = None  # the turns of the request that made the first summary
    summary: str | None = None
    for turns in range(2, 90):
        before = len(summarizer.calls)
        prepared = await prepare(h, turns, summarizer)
        await h.preparer.background.drain()
        detail = summarized(prepared)
        if detail is None:
            continue
        body = prepared.parsed["messages"][2]["content"]
        if first is None:
            first, summary = turns, body
            continue
        if body == summary:  # the cut went behind the tail item, the summary unchanged
            if turns - first < 12 - 4:  # roll_up_turns - PRECOMPUTE_TURNS: none due yet
                assert len(summarizer.calls) == before, turns
            continue
        assert turns - first >= 12  # rolled up: not before roll_up_turns
        assert len(summarizer.calls) == before  # made ahead, in the background
        assert detail["source"] in ("cache", "background") and detail["by"] == "sum-1"
        return
    raise AssertionError("the summary never rolled up")


async def test_background_summaries_are_reported_made_or_failed(tmp_path: Path) -> None:
    for summarizer, outcome in ((Recording(), "made"), (Failing(), "failed")):
        seen: list[tuple[str, dict[str, int]]] = []
        h = harness(tmp_path / outcome, **observer_for(seen))
        for turns in range(2, 60):
            await prepare(h, turns, summarizer)
            await h.preparer.background.drain()
            if summarizer.calls:
                break
        assert seen and seen[0][0] == outcome
        usage = {"prompt_tokens": 10, "completion_tokens": 5}
        assert seen[0][1] == (usage if outcome == "made" else {})


def observer_for(seen: list[tuple[str, dict[str, int]]]) -> dict[str, Any]:
    return {"background_observer": lambda outcome, usage: seen.append((outcome, usage))}


NEAR = """
mode: {mode}
budget: {{context_window: 100000, reserved_output: 1000, safety_margin: 0, trigger: {trigger},
          target: {target}}}
steps:
  - {{kind: offload_tool_results, threshold_chars: 3000}}
  - kind: summarize
    summarizer: {{kind: llm, max_summary_tokens: 300, timeout_s: 5, precompute_at: 0.5}}
"""


async def test_under_its_trigger_a_request_starts_summaries_from_half_of_it(
    tmp_path: Path,
) -> None:
    """`precompute_at: 0.5`: a request of exactly half its trigger (nothing to reduce yet)
    starts the summaries of the next cut; one token less, or a policy that never reduces, or a
    request without a summarizer, starts none."""
    body = {"model": "gpt-4o", "messages": agent_history(8, result_chars=800)}
    raw = json.dumps(body).encode()

    async def calls(name: str, trigger: int, *, mode: str = "compact", with_model: bool = True,
                    call: CallOptions = FIRST_CALL) -> int:
        write_policy(tmp_path / name, NEAR.format(mode=mode, trigger=trigger, target=trigger // 2))
        h, summarizer = make_harness(tmp_path / name, shared_counters()), Recording()
        prepared = await h.preparer.prepare(
            body, raw, TENANT, OPENAI_CHAT, summarizer=summarizer if with_model else None,
            call=call,
        )
        assert prepared.body is raw and prepared.manifest.outcome == "within_trigger"
        await h.preparer.background.drain()
        return len(summarizer.calls)

    tokens = await _tokens(tmp_path, body, raw)
    assert await calls("at", 2 * tokens) > 0
    assert await calls("below", 2 * tokens + 2) == 0
    assert await calls("reject", 2 * tokens, mode="reject") == 0
    assert await calls("no-model", 2 * tokens, with_model=False) == 0
    assert await calls("follow-up", 2 * tokens, call=FOLLOW_UP) == 0


async def _tokens(tmp_path: Path, body: dict[str, Any], raw: bytes) -> int:
    write_policy(tmp_path / "count", "mode: inspect\n")
    prepared = await make_harness(tmp_path / "count", shared_counters()).preparer.prepare(
        body, raw, TENANT, OPENAI_CHAT
    )
    return prepared.manifest.tokens_before
