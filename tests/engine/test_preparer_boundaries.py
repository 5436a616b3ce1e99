"""Preparer at the edges of the budget and in the passive modes, through `Preparer.prepare` only.

Budgets here are exact token numbers calibrated on the request itself, so each equality boundary
(input == trigger, input == allowance, prepared == allowance) is hit exactly. Every request is
sent as `client_bytes` (not a re-serialisation), so "forwarded untouched" means the client's bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pipeline_harness import Harness, agent_history, client_bytes, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.engine.manifest import Outcome, Prepared
from proxy.errors import ErrorCode, ProxyError, RefusalReason
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.tokens.counters import TokenCounters

MODEL = "gpt-4o"


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


def request(turns: int = 2, result_chars: int = 2000) -> dict[str, Any]:
    """An agent history with a non-ASCII message and an unknown field (bytes worth keeping)."""
    messages = agent_history(turns, result_chars)
    messages.insert(2, {"role": "user", "content": "Déjà vu: café, naïve, 東京 ✓"})
    return {"model": MODEL, "x_client": {"z": 1, "a": [True, None]}, "messages": messages}


def tokens_of(counters: TokenCounters, body: dict[str, Any]) -> int:
    return counters.for_model(MODEL).count_request(body)


def harness_for(
    tmp_path: Path,
    counters: TokenCounters,
    *,
    allowance: int,
    trigger: int,
    extra: str = "",
    target: int | None = None,
) -> Harness:
    """A policy whose allowance, trigger and target (the trigger unless given) are exactly these
    token numbers."""
    write_policy(
        tmp_path,
        "extends: default\n"
        f"budget: {{context_window: {allowance}, reserved_output: 0, safety_margin: 0, "
        f"trigger: {trigger}, target: {trigger if target is None else target}}}\n" + extra,
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
    # plenty to reduce if it acted (offloading only over the trigger, the old behaviour)
    steps = (
        "steps: [{kind: offload_tool_results, threshold_chars: 1000, when: over_trigger},"
        " {kind: clear_tool_results}, {kind: drop_turns}]\n"
    )
    h = harness_for(tmp_path, counters, allowance=n + 500, trigger=n, extra=steps)
    prepared = await h.prepare(body)
    assert prepared.manifest.trigger == prepared.manifest.tokens_before == n
    assert_forwarded_untouched(prepared, body, "within_trigger")
    one_over = harness_for(tmp_path, counters, allowance=n + 500, trigger=n - 1, extra=steps)
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


async def test_invalid_messages_forwarded_are_noted_with_the_problem(
    tmp_path: Path, counters: TokenCounters
) -> None:
    body = request(turns=6)
    body["messages"] = [m for m in body["messages"] if m.get("tool_call_id") != "call_0_3"]
    n = tokens_of(counters, body)
    prepared = await harness_for(tmp_path, counters, allowance=n // 2, trigger=n // 4).prepare(body)
    [problem, *_] = OPENAI_CHAT.parse(body["messages"]).problems
    assert prepared.manifest.notes == [f"invalid messages forwarded untouched: {problem.reason}"]


# -- refusals: what the client is told ----------------------------------------------------------


async def test_refusal_message_names_the_reason_in_words(
    tmp_path: Path, counters: TokenCounters
) -> None:
    body = request()
    n = tokens_of(counters, body)
    h = harness_for(tmp_path, counters, allowance=n - 1, trigger=n - 100, extra="mode: reject\n")
    with pytest.raises(ProxyError) as caught:
        await h.prepare(body)
    assert caught.value.message == (
        f"This model's maximum context length is {n - 1} tokens. However, your messages "
        f"resulted in {n} tokens after context preparation (0 tokens are kept for the "
        "completion, policy 'test': input exceeds allowance). Please reduce the length of the "
        "messages. (context_length_exceeded)"
    )


class ConfirmsNothing(MemoryStore):
    """An artifact store that is down: no write is ever confirmed."""

    async def put_many(
        self, scope: str, items: Mapping[str, NewArtifact], *, ttl_seconds: int, max_per_scope: int
    ) -> set[str]:
        return set()


async def test_refusal_for_lack_of_a_store_is_a_503_with_details(
    tmp_path: Path, counters: TokenCounters
) -> None:
    body = request(turns=4, result_chars=6000)
    n = tokens_of(counters, body)
    write_policy(
        tmp_path,
        "extends: default\n"
        f"budget: {{context_window: {n // 2}, reserved_output: 0, safety_margin: 0, "
        f"trigger: {n // 4}, target: {n // 4}}}\n" + OFFLOAD_ONLY,
    )
    h = make_harness(tmp_path, counters, ConfirmsNothing(b"s"))
    with pytest.raises(ProxyError) as caught:
        await h.prepare(body)
    error = caught.value
    assert error.code is ErrorCode.artifact_store_unavailable and error.code.status == 503
    assert error.reason is RefusalReason.artifact_store_unavailable
    assert error.param is None
    assert error.message.startswith("The artifact store did not confirm the writes")
    assert error.message.endswith(
        f"tokens after preparation, {n // 2} allowed); nothing was removed. Retry later."
    )
    details = dict(error.details or {})
    assert 0 < details.pop("protected_tokens") < n // 2
    assert details == {
        "reason": "artifact_store_unavailable",
        "allowance_tokens": n // 2,
        "refusal_limit_tokens": n // 2,
        "final_tokens": n,
        "reserved_output_tokens": 0,
        "policy": "test",
        "context_window_source": "policy",
    }
    assert error.envelope()["error"]["ctxproxy"]["reason"] == "artifact_store_unavailable"


# -- the read tool ------------------------------------------------------------------------------


@pytest.mark.parametrize("enabled", [True, False])
async def test_read_tool_offered_only_when_enabled(
    tmp_path: Path, counters: TokenCounters, enabled: bool
) -> None:
    body = request(turns=2, result_chars=6000)
    n = tokens_of(counters, body)
    h = harness_for(
        tmp_path,
        counters,
        allowance=n,
        trigger=300,
        extra=OFFLOAD_ONLY + f"read_tool: {{enabled: {str(enabled).lower()}}}\n",
    )
    prepared = await h.prepare(body)
    assert prepared.changed and "art_" in prepared.body.decode()
    tools = [t["function"]["name"] for t in prepared.parsed.get("tools", [])]
    assert tools == (["read_context_artifact", "search_context_artifact"] if enabled else [])
    assert (prepared.synthetic is not None) is enabled


async def test_protected_content_exactly_at_the_allowance_is_not_the_reason(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """Protected content that just fits leaves the steps to blame; one token more, the content."""
    body = request(turns=3)
    n = tokens_of(counters, body)

    async def refusal(allowance: int) -> dict[str, Any]:
        h = harness_for(
            tmp_path / str(allowance),
            counters,
            allowance=allowance,
            trigger=100,
            extra="steps: []\n",
        )
        with pytest.raises(ProxyError) as caught:
            await h.prepare(body)
        return caught.value.details or {}

    protected = (await refusal(n - 1))["protected_tokens"]
    assert 0 < protected < n - 1
    at = await refusal(protected)
    assert (at["reason"], at["protected_tokens"]) == ("policy_steps_exhausted", protected)
    below = await refusal(protected - 1)
    assert below["reason"] == "protected_content_exceeds_allowance"


def four_recent_results() -> dict[str, Any]:
    """One old turn with a large result, then four recent results of ~580 tokens each."""
    messages = agent_history(1, result_chars=6000)
    for i in range(4):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "data " * 580})
    return {"model": MODEL, "messages": messages}


async def test_last_resort_only_when_the_plan_is_over_the_allowance(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """A plan that reaches exactly the allowance is used; one token short, the steps relax."""
    body = four_recent_results()
    extra = "steps: [{kind: clear_tool_results, keep_recent_exchanges: 4}]\n"
    roomy = harness_for(
        tmp_path / "roomy", counters, allowance=tokens_of(counters, body), trigger=300, extra=extra
    )
    strict = (await roomy.prepare(body)).manifest.tokens_after
    exact = await harness_for(
        tmp_path / "exact", counters, allowance=strict, trigger=300, extra=extra
    ).prepare(body)
    assert exact.manifest.tokens_after == strict and exact.manifest.notes == []
    short = await harness_for(
        tmp_path / "short", counters, allowance=strict - 1, trigger=300, extra=extra
    ).prepare(body)
    assert short.manifest.tokens_after < strict
    assert [n for n in short.manifest.notes if n.startswith("last resort")]


async def test_store_down_at_exactly_the_allowance_forwards_the_request_as_it_came(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """Nothing could be offloaded: the request, which fits, goes out as sent (no read tool)."""
    body = request(turns=2, result_chars=6000)
    n = tokens_of(counters, body)
    write_policy(
        tmp_path,
        "extends: default\n"
        f"budget: {{context_window: {n}, reserved_output: 0, safety_margin: 0, "
        "trigger: 300, target: 300}\n" + OFFLOAD_ONLY,
    )
    prepared = await make_harness(tmp_path, counters, ConfirmsNothing(b"s")).prepare(body)
    assert_forwarded_untouched(prepared, body, Outcome.nothing_reduced)
    assert prepared.manifest.tokens_after == n and prepared.synthetic is None
    [note] = prepared.manifest.notes
    kept = r"artifact store did not confirm [1-9]\d* write\(s\): that content was kept"
    assert re.fullmatch(kept, note)


async def test_reduced_to_exactly_the_target_is_reduced(
    tmp_path: Path, counters: TokenCounters
) -> None:
    body = request(turns=1, result_chars=6000)
    n = tokens_of(counters, body)
    unreachable = harness_for(
        tmp_path / "low", counters, allowance=n, trigger=300, extra=OFFLOAD_ONLY
    )
    after = (await unreachable.prepare(body)).manifest.tokens_after
    assert 300 < after < n

    async def outcome(target: int) -> str:
        h = harness_for(
            tmp_path / str(target),
            counters,
            allowance=n,
            trigger=n - 1,
            target=target,
            extra=OFFLOAD_ONLY,
        )
        prepared = await h.prepare(body)
        assert prepared.changed and prepared.manifest.tokens_after == after
        return str(prepared.manifest.outcome)

    assert await outcome(after + 50) == "reduced"
    assert await outcome(after) == "reduced"
    assert await outcome(after - 1) == "reduced_above_target"
