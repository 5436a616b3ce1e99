"""Preparer: modes, each step's effect, refusal, store failures, determinism, prefix stability."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from pipeline_harness import (
    SMALL,
    SMALL_BUDGET,
    TENANT,
    Harness,
    agent_history,
    client_bytes,
    make_harness,
    write_policy,
)
from shared_tokens import shared_counters

import proxy.engine.reducer as reducer
from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.engine.manifest import SyntheticTools
from proxy.engine.policy import ReadToolPolicy
from proxy.engine.step_api import PrepareContext, Step, StepServices
from proxy.engine.steps import build_steps
from proxy.engine.working_set import WorkingSetKey, history_digest, remember
from proxy.errors import ErrorCode, ProxyError, RefusalReason
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.conversation import parse_conversation
from proxy.tokens.counters import TokenCounters


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


@pytest.fixture
def harness(tmp_path: Path, counters: TokenCounters) -> Harness:
    write_policy(tmp_path, SMALL)
    return make_harness(tmp_path, counters)


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": messages, **extra}


async def test_under_trigger_forwards_original_bytes(harness: Harness) -> None:
    request = body(agent_history(1, result_chars=500), x_unknown={"k": [1, 2]})
    raw = b'{"model":"gpt-4o",  "messages":' + orjson.dumps(request["messages"]) + b"}"
    prepared = await harness.preparer.prepare(request, raw, TENANT, OPENAI_CHAT)
    assert prepared.changed is False
    assert prepared.body is raw
    assert prepared.manifest.outcome == "within_trigger"
    assert 0 < prepared.manifest.tokens_before == prepared.manifest.tokens_after


async def test_over_trigger_reduces_within_allowance(harness: Harness) -> None:
    prepared = await harness.prepare(body(agent_history(12)))
    manifest = prepared.manifest
    assert prepared.changed
    assert manifest.tokens_before > manifest.trigger
    # every result is offloaded when seen, which keeps the replay under the trigger: nothing
    # else has to go (before offloading at the threshold, it reduced to the target)
    assert manifest.tokens_after <= manifest.trigger
    steps = {a.step for a in manifest.actions}
    assert steps <= {"offload_tool_results", "clear_tool_results", "drop_turns"} and steps
    assert orjson.loads(prepared.body) == prepared.parsed
    assert parse_conversation(prepared.parsed["messages"]).problems == ()
    counter = harness.counters.for_model("gpt-4o")
    assert counter.count_request(prepared.parsed) == manifest.tokens_after


async def test_offloaded_preview_names_a_stored_original(harness: Harness) -> None:
    messages = agent_history(3, result_chars=20_000)
    prepared = await harness.prepare(body(messages))
    previews = [
        m
        for m in prepared.parsed["messages"]
        if m["role"] == "tool" and "offloaded as artifact" in m["content"]
    ]
    assert previews
    for message in previews:
        original = next(m for m in messages if m.get("tool_call_id") == message["tool_call_id"])
        artifact_id = message["content"].split("artifact ", 1)[1].split(";", 1)[0]
        stored = await harness.store.get(TENANT.scope, artifact_id)
        assert stored is not None and stored.content == original["content"]
        head, tail = original["content"][:300], original["content"][-200:]
        omitted = len(original["content"]) - 500
        assert message["content"].endswith(f"\n{head}\n...[truncated {omitted} chars]...\n{tail}")
        assert set(message) == set(original)


async def test_clear_keeps_recent_exchanges_and_every_field(harness: Harness) -> None:
    messages = agent_history(10, result_chars=2500)
    for m in messages:
        if m["role"] == "tool":
            m["x_meta"] = {"kept": True}
    prepared = await harness.prepare(body(messages))
    out = prepared.parsed["messages"]
    tools = [m for m in out if m["role"] == "tool"]
    assert tools[-1] == messages[-2]  # the most recent exchange is protected
    cleared = [m for m in tools if "tool result cleared" in m["content"]]
    assert cleared
    for m in cleared:
        assert m["x_meta"] == {"kept": True} and m["tool_call_id"].startswith("call_")


async def test_drop_turns_archives_span_behind_one_notice(harness: Harness) -> None:
    messages = agent_history(120, result_chars=200)
    prepared = await harness.prepare(body(messages))
    out = prepared.parsed["messages"]
    assert out[:2] == messages[:2]  # system prefix and the task
    notices = [
        m
        for m in out
        if harness.own_text(m.get("content")).startswith("[ctxproxy: ")
        and "earlier turn(s)" in m["content"]
    ]
    assert len(notices) == 1
    artifact_id = notices[0]["content"].split("archived as artifact ", 1)[1].split(" ", 1)[0]
    archive = await harness.store.get(TENANT.scope, artifact_id)
    assert archive is not None
    dropped = [orjson.loads(line) for line in archive.content.split("\n")]
    kept_tail = out[out.index(notices[0]) + 1 :]
    rebuilt = messages[1:2] + dropped + kept_tail
    assert len(rebuilt) == len(messages) - 1
    for original, got in zip(messages[1:], rebuilt, strict=True):
        if harness.own_text(got.get("content")).startswith("[ctxproxy: tool result cleared"):
            assert {**got, "content": original["content"]} == original
        else:
            assert got == original
    assert out[-4:] == messages[-4:]


async def test_refusal_when_protected_content_cannot_fit(harness: Harness) -> None:
    huge_task = "word " * 9000
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": huge_task}]
    with pytest.raises(ProxyError) as caught:
        await harness.prepare(body(messages))
    error = caught.value
    assert error.code is ErrorCode.context_length_exceeded
    assert error.param == "messages"
    assert "maximum context length is 8000 tokens" in error.message
    assert error.message.endswith("(context_length_exceeded)")
    details = error.details or {}
    assert details["reason"] == "protected_content_exceeds_allowance"
    assert details["final_tokens"] > details["allowance_tokens"] == 7000
    assert details["reserved_output_tokens"] == 1000 and details["policy"] == "test"


async def test_reserved_output_comes_from_request(tmp_path: Path, counters: TokenCounters) -> None:
    write_policy(tmp_path, "budget: {context_window: 8000, safety_margin: 0}")
    h = make_harness(tmp_path, counters)
    prepared = await h.prepare(body(agent_history(1, 100), max_completion_tokens=3000))
    assert prepared.manifest.reserved_output == 3000
    assert prepared.manifest.allowance == 5000


@pytest.mark.parametrize(("mode", "outcome"), [("inspect", "inspected"), ("off", "unchanged")])
async def test_passive_modes_change_nothing(
    tmp_path: Path, counters: TokenCounters, mode: str, outcome: str
) -> None:
    write_policy(tmp_path, SMALL + f"mode: {mode}\n")
    h = make_harness(tmp_path, counters)
    request = body(agent_history(30))
    prepared = await h.prepare(request)
    assert not prepared.changed and prepared.manifest.outcome == outcome
    assert prepared.body == client_bytes(request)  # the client's bytes, not a re-dump


async def test_reject_mode_refuses_only_over_allowance(
    tmp_path: Path, counters: TokenCounters
) -> None:
    write_policy(tmp_path, SMALL + "mode: reject\n")
    h = make_harness(tmp_path, counters)
    assert not (await h.prepare(body(agent_history(1, 500)))).changed
    with pytest.raises(ProxyError) as caught:
        await h.prepare(body(agent_history(30)))
    assert caught.value.code is ErrorCode.context_length_exceeded
    assert (caught.value.details or {})["reason"] == "input_exceeds_allowance"


def orphaned(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    broken = [
        m
        for m in messages
        if not (
            m["role"] == "assistant"
            and m.get("tool_calls")
            and m["tool_calls"][0]["id"] == "call_0_3"
        )
    ]
    return broken


async def test_invalid_messages_forwarded_untouched_by_default(harness: Harness) -> None:
    request = body(orphaned(agent_history(30)))
    prepared = await harness.prepare(request)
    assert not prepared.changed and prepared.manifest.outcome == "invalid_forwarded"
    assert prepared.body == client_bytes(request)  # the client's bytes, not a re-dump


async def test_invalid_messages_rejected_with_index_and_id(
    tmp_path: Path, counters: TokenCounters
) -> None:
    write_policy(tmp_path, SMALL + "on_invalid: reject\n")
    h = make_harness(tmp_path, counters)
    messages = orphaned(agent_history(5))
    index = next(i for i, m in enumerate(messages) if m.get("tool_call_id") == "call_0_3")
    with pytest.raises(ProxyError) as caught:
        await h.prepare(body(messages))
    assert caught.value.code is ErrorCode.invalid_messages
    assert caught.value.reason is RefusalReason.invalid_messages
    assert caught.value.param == f"messages[{index}]"
    assert "call_0_3" in caught.value.message


class FailingStore(MemoryStore):
    async def put_many(
        self, scope: str, items: Mapping[str, NewArtifact], *, ttl_seconds: int, max_per_scope: int
    ) -> set[str]:
        return set()


async def test_store_failure_keeps_content_and_never_shows_an_id(
    tmp_path: Path, counters: TokenCounters
) -> None:
    write_policy(tmp_path, SMALL)
    h = make_harness(tmp_path, counters, FailingStore(b"s"))
    small = body(agent_history(2, result_chars=3200))  # over trigger, under allowance
    prepared = await h.prepare(small)
    assert "art_" not in prepared.body.decode()
    assert prepared.manifest.tokens_after <= prepared.manifest.allowance
    with pytest.raises(ProxyError) as caught:
        await h.prepare(body(agent_history(12)))
    assert caught.value.code is ErrorCode.artifact_store_unavailable
    assert caught.value.message.startswith("The artifact store did not confirm")
    assert "context_length_exceeded" not in caught.value.message


async def test_deterministic_and_idempotent(harness: Harness) -> None:
    request = body(agent_history(15))
    first = await harness.prepare(request)
    second = await harness.prepare(request)
    assert first.body == second.body
    again = await harness.prepare(first.parsed)
    assert not again.changed


async def test_synthetic_tools_added_only_when_artifacts_are_referenced(harness: Harness) -> None:
    client_tool = {"type": "function", "function": {"name": "read_file", "parameters": {}}}
    reduced = await harness.prepare(body(agent_history(12), tools=[client_tool]))
    names = [t["function"]["name"] for t in reduced.parsed["tools"]]
    assert names == ["read_file", "read_context_artifact", "search_context_artifact"]
    untouched = await harness.prepare(body(agent_history(1, 100), tools=[client_tool]))
    assert [t["function"]["name"] for t in untouched.parsed["tools"]] == ["read_file"]


def shared_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


async def test_prefix_stays_stable_as_the_conversation_grows(harness: Harness) -> None:
    """Share of each turn's prepared prompt (in tokens) that the next turn's keeps as its prefix."""
    counter = harness.counters.for_model("gpt-4o")
    history = agent_history(120, result_chars=600)
    previous: list[Any] | None = None
    kept, total, reduced = 0, 0, 0
    for turns in range(3, 121):
        end = 2 + turns * 4 - 1
        prepared = await harness.prepare(body(history[:end]))
        messages = prepared.parsed["messages"]
        assert prepared.manifest.tokens_after <= prepared.manifest.allowance
        reduced += prepared.changed
        if previous is not None:
            n = shared_prefix(previous, messages)
            kept += sum(counter.count_message(m) for m in previous[:n])
            total += sum(counter.count_message(m) for m in previous)
        previous = messages
    assert reduced > 80  # the window is really exercised
    assert kept / total >= 0.85


async def test_steps_settle_with_the_requests_services(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, StepServices]] = []

    def recording(configs: Any, ctx: PrepareContext) -> list[Step[Any]]:
        steps = build_steps(configs, ctx)
        for step in steps:
            settle = step.settle

            async def recorded(
                ctx: PrepareContext, units: list[int], services: StepServices, cuts: Any,
                name: str = step.name, settle: Any = settle,
            ) -> None:
                seen.append((name, services))
                await settle(ctx, units, services, cuts)

            step.settle = recorded  # type: ignore[method-assign]
        return steps

    monkeypatch.setattr(reducer, "build_steps", recording)
    prepared = await harness.prepare(body(agent_history(20)))
    acted = [action.step for action in prepared.manifest.actions]
    assert len(acted) >= 2 and [name for name, _ in seen] == acted  # each acting step settles
    services = {id(s) for _, s in seen}
    assert len(services) == 1  # one per request, shared by its steps
    given = seen[0][1]
    assert given.store is harness.store and given.scope == TENANT.scope
    assert given.counter.method == prepared.manifest.counting_method


async def test_last_resort_previews_protected_recent_results(
    tmp_path: Path, counters: TokenCounters
) -> None:
    write_policy(
        tmp_path,
        "budget: {context_window: 2600, reserved_output: 200, safety_margin: 0}\n"
        "steps: [{kind: offload_tool_results, threshold_chars: 3000},\n"
        "        {kind: clear_tool_results, keep_recent_exchanges: 4}, {kind: drop_turns}]\n",
    )
    h = make_harness(tmp_path, counters)
    messages = agent_history(1, result_chars=100)
    for i in range(4):  # four results in the current turn, each under the offload threshold
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "data " * 580})
    prepared = await h.prepare(body(messages))
    assert prepared.manifest.tokens_after <= prepared.manifest.allowance
    assert any("last resort" in note for note in prepared.manifest.notes)
    # issue 12.7: the protected recent results (the newest included) are offloaded behind
    # previews, head and tail visible, never blanked by a placeholder
    results = [m for m in prepared.parsed["messages"] if m["role"] == "tool"][-4:]
    original = "data " * 580
    shown = f"\n{original[:500]}\n...[truncated {len(original) - 700} chars]...\n{original[-200:]}"
    for result in results:
        assert h.own_text(result["content"]).startswith("[ctxproxy: tool result offloaded")
        assert result["content"].endswith(shown)


async def test_when_previews_do_not_fit_only_the_newest_result_keeps_one(
    tmp_path: Path, counters: TokenCounters
) -> None:
    # Level 2 of the last resort: previews of all four recent results would not fit 1,300
    # tokens; the older ones are cleared and the newest keeps a (shorter) preview, never blanked.
    write_policy(
        tmp_path,
        "budget: {context_window: 1500, reserved_output: 200, safety_margin: 0}\n"
        "steps: [{kind: offload_tool_results, threshold_chars: 3000},\n"
        "        {kind: clear_tool_results, keep_recent_exchanges: 4}, {kind: drop_turns}]\n",
    )
    h = make_harness(tmp_path, counters)
    messages = agent_history(1, result_chars=100)
    for i in range(4):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": "{}"},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"data{i} " * 580})
    prepared = await h.prepare(body(messages))
    assert prepared.manifest.tokens_after <= prepared.manifest.allowance
    results = [m for m in prepared.parsed["messages"] if m["role"] == "tool"][-4:]
    cleared = [
        h.own_text(r["content"]).startswith("[ctxproxy: tool result cleared") for r in results
    ]
    assert cleared == [True, True, True, False]
    newest = "data3 " * 580
    assert h.own_text(results[-1]["content"]).startswith("[ctxproxy: tool result offloaded")
    assert results[-1]["content"].endswith(
        f"\n{newest[:250]}\n...[truncated {len(newest) - 350} chars]...\n{newest[-100:]}"
    )


async def test_refusal_reason_names_exhausted_steps(
    tmp_path: Path, counters: TokenCounters
) -> None:
    write_policy(tmp_path, SMALL_BUDGET + "steps: []\n")
    h = make_harness(tmp_path, counters)
    with pytest.raises(ProxyError) as caught:
        await h.prepare(body(agent_history(30)))
    details = caught.value.details or {}
    assert details["reason"] == "policy_steps_exhausted"
    assert caught.value.reason is RefusalReason.policy_steps_exhausted
    assert details["protected_tokens"] <= details["allowance_tokens"] < details["final_tokens"]


async def test_a_request_continuing_history_at_the_provider_goes_as_it_came(
    harness: Harness,
) -> None:
    """`unprepared`: nothing is counted or reduced (the proxy cannot see the history), the
    client's bytes go, and the manifest names the tenant's policy and why."""
    request = body(agent_history(12), x_unknown={"k": [1, 2]})
    raw = client_bytes(request)
    prepared = harness.preparer.unprepared(request, raw, TENANT, OPENAI_CHAT, "continues resp_1")
    assert (prepared.body, prepared.changed, prepared.parsed) == (raw, False, request)
    assert prepared.body is raw and prepared.synthetic is None
    manifest = prepared.manifest
    assert (manifest.policy, manifest.model, manifest.mode) == ("test", "gpt-4o", "window")
    assert (manifest.notes, manifest.note_codes) == (["continues resp_1"], ["history_at_provider"])
    assert manifest.actions == [] and manifest.tokens_before == 0


async def test_an_unprepared_request_names_the_policy_its_model_resolves_to(
    tmp_path: Path, counters: TokenCounters
) -> None:
    write_policy(tmp_path, SMALL + 'models:\n  "gpt-4o*":\n    mode: inspect\n')
    preparer = make_harness(tmp_path, counters).preparer
    for model, mode in (("gpt-4o", "inspect"), ("o3", "window")):
        request = body([{"role": "user", "content": "Hi"}]) | {"model": model}
        prepared = preparer.unprepared(request, client_bytes(request), TENANT, OPENAI_CHAT, "x")
        assert (prepared.manifest.model, prepared.manifest.mode) == (model, mode)


async def test_a_request_with_read_exchanges_put_back_carries_the_read_tools(
    harness: Harness,
) -> None:
    """Under the trigger, nothing reduced: still not the client's bytes, since the working set
    put an exchange of the read tools back, and the proxy executes what the model reads next."""
    history = [{"role": "user", "content": "what is in the log?"}]
    exchange = [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "c1", "type": "function",
            "function": {"name": "read_context_artifact", "arguments": '{"artifact_id": "x"}'},
        }]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"content": "line 3: error"}'},
    ]
    key = WorkingSetKey(TENANT.scope, history_digest(OPENAI_CHAT, history), 60, 100)
    assert await remember(harness.store, key, exchange)
    answer = {"role": "assistant", "content": "an error on line 3"}
    prepared = await harness.prepare(body([*history, answer, {"role": "user", "content": "Why?"}]))
    assert prepared.manifest.outcome == "within_trigger" and prepared.changed
    assert prepared.parsed["messages"] == [*history, *exchange, answer, prepared.parsed[
        "messages"][-1]]
    assert [t["function"]["name"] for t in prepared.parsed["tools"]] == [
        "read_context_artifact", "search_context_artifact"
    ]
    read = ReadToolPolicy()  # the policy sets none of its own
    assert prepared.synthetic == SyntheticTools(
        read.max_rounds, read.max_page_chars, prepared.manifest.allowance
    )
