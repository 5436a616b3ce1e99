"""Preparer at the edges of the budget and in the passive modes, through `Preparer.prepare` only.

Budgets here are exact token numbers calibrated on the request itself, so each equality boundary
(input == trigger, input == allowance, prepared == allowance) is hit exactly. Every request is
sent as `client_bytes` (not a re-serialisation), so "forwarded untouched" means the client's bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pipeline_harness import Harness, agent_history, client_bytes, make_harness, write_policy

from proxy.engine.manifest import Prepared
from proxy.errors import ErrorCode, ProxyError
from proxy.tokens.counters import TokenCounters

MODEL = "gpt-4o"


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return TokenCounters()


def request(turns: int = 2, result_chars: int = 2000) -> dict[str, Any]:
    """An agent history with a non-ASCII message and an unknown field (bytes worth keeping)."""
    messages = agent_history(turns, result_chars)
    messages.insert(2, {"role": "user", "content": "Déjà vu: café, naïve, 東京 ✓"})
    return {"model": MODEL, "x_client": {"z": 1, "a": [True, None]}, "messages": messages}


def tokens_of(counters: TokenCounters, body: dict[str, Any]) -> int:
    return counters.for_model(MODEL).count_request(body)


def harness_for(
    tmp_path: Path, counters: TokenCounters, *, allowance: int, trigger: int, extra: str = ""
) -> Harness:
    """A policy whose allowance and trigger are exactly these token numbers."""
    write_policy(
        tmp_path,
        "extends: default\n"
        f"budget: {{context_window: {allowance}, reserved_output: 0, safety_margin: 0, "
        f"trigger: {trigger}, target: {trigger}}}\n" + extra,
    )
    harness = make_harness(tmp_path, counters)
    return harness


def assert_forwarded_untouched(prepared: Prepared, body: dict[str, Any], outcome: str) -> None:
    assert prepared.manifest.outcome == outcome
    assert not prepared.changed
    assert prepared.body == client_bytes(body), "not the client's bytes"
    assert prepared.parsed is body
    assert prepared.manifest.tokens_after == prepared.manifest.tokens_before


# -- reject mode: over the trigger but within the allowance is forwarded ----------------------


@pytest.mark.parametrize("room", [0, 1, 150], ids=["at_allowance", "one_below", "well_below"])
async def test_reject_mode_forwards_over_trigger_within_allowance(
    tmp_path: Path, counters: TokenCounters, room: int
) -> None:
    body = request()
    n = tokens_of(counters, body)
    h = harness_for(tmp_path, counters, allowance=n + room, trigger=n - 100, extra="mode: reject\n")
    prepared = await h.prepare(body)
    assert prepared.manifest.tokens_before == n
    assert prepared.manifest.trigger < n <= prepared.manifest.allowance
    assert_forwarded_untouched(prepared, body, "within_allowance")


async def test_reject_mode_refuses_one_token_over_the_allowance(
    tmp_path: Path, counters: TokenCounters
) -> None:
    body = request()
    n = tokens_of(counters, body)
    h = harness_for(tmp_path, counters, allowance=n - 1, trigger=n - 100, extra="mode: reject\n")
    with pytest.raises(ProxyError) as caught:
        await h.prepare(body)
    details = caught.value.details or {}
    assert caught.value.code is ErrorCode.context_length_exceeded
    assert details["reason"] == "input_exceeds_allowance"
    assert (details["final_tokens"], details["allowance_tokens"]) == (n, n - 1)


# -- window mode: the trigger and the allowance are inclusive ---------------------------------


async def test_input_exactly_at_the_trigger_is_not_reduced(
    tmp_path: Path, counters: TokenCounters
) -> None:
    body = request(turns=3, result_chars=4000)
    n = tokens_of(counters, body)
    h = harness_for(
        tmp_path, counters, allowance=n + 500, trigger=n,
        extra="tool_results: {offload_threshold_chars: 1000}\n",  # plenty to reduce if it acted
    )
    prepared = await h.prepare(body)
    assert prepared.manifest.trigger == prepared.manifest.tokens_before == n
    assert_forwarded_untouched(prepared, body, "within_trigger")
    one_over = harness_for(
        tmp_path, counters, allowance=n + 500, trigger=n - 1,
        extra="tool_results: {offload_threshold_chars: 1000}\n",
    )
    assert (await one_over.prepare(body)).changed


OFFLOAD_ONLY = (
    "protect: {recent_turns: 1, recent_tool_exchanges: 0}\n"
    "tool_results: {offload_threshold_chars: 1000, preview_head_chars: 200, "
    "preview_tail_chars: 100}\n"
    "steps: [{kind: offload_tool_results}]\n"
)


async def test_prepared_exactly_at_the_allowance_is_forwarded(
    tmp_path: Path, counters: TokenCounters
) -> None:
    body = request(turns=1, result_chars=6000)
    n = tokens_of(counters, body)
    roomy = harness_for(tmp_path / "roomy", counters, allowance=n, trigger=300, extra=OFFLOAD_ONLY)
    reduced = await roomy.prepare(body)
    after = reduced.manifest.tokens_after
    assert reduced.changed and 300 < after < n  # one offload; the target is out of reach
    exact = harness_for(
        tmp_path / "exact", counters, allowance=after, trigger=300, extra=OFFLOAD_ONLY
    )
    prepared = await exact.prepare(body)
    assert prepared.manifest.tokens_after == prepared.manifest.allowance == after
    assert prepared.changed and prepared.manifest.outcome == "reduced_above_target"
    assert prepared.body == reduced.body
    assert tokens_of(counters, prepared.parsed) == after
    short = harness_for(
        tmp_path / "short", counters, allowance=after - 1, trigger=300, extra=OFFLOAD_ONLY
    )
    with pytest.raises(ProxyError) as caught:
        await short.prepare(body)
    assert (caught.value.details or {})["final_tokens"] == after


# -- passive modes and invalid input: the client's bytes, not a re-serialisation -----------------


@pytest.mark.parametrize(("mode", "outcome"), [("off", "unchanged"), ("inspect", "inspected")])
async def test_passive_modes_forward_the_clients_bytes(
    tmp_path: Path, counters: TokenCounters, mode: str, outcome: str
) -> None:
    body = request(turns=6)
    n = tokens_of(counters, body)
    h = harness_for(tmp_path, counters, allowance=n // 2, trigger=n // 4, extra=f"mode: {mode}\n")
    prepared = await h.prepare(body)
    assert prepared.manifest.outcome == outcome and not prepared.changed
    assert prepared.body == client_bytes(body), "not the client's bytes"
    assert b"\\u00e9" in prepared.body and "é".encode() not in prepared.body


async def test_invalid_messages_forward_the_clients_bytes(
    tmp_path: Path, counters: TokenCounters
) -> None:
    body = request(turns=6)
    body["messages"] = [m for m in body["messages"] if m.get("tool_call_id") != "call_0_3"]
    n = tokens_of(counters, body)
    h = harness_for(tmp_path, counters, allowance=n // 2, trigger=n // 4)
    prepared = await h.prepare(body)
    assert_forwarded_untouched(prepared, body, "invalid_forwarded")
