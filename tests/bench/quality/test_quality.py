"""Smoke tests of the policy-quality bench: a deterministic generator and a judge that notices
broken tool pairs, unreachable evidence and prefix breaks (bench/quality/)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

from shared_tokens import shared_catalog, shared_counters

from bench.quality.gen import generate, growing
from bench.quality.gen_agent import AGENT_KEY, agent_session
from bench.quality.judge import Judge, Result
from bench.quality.methods import FillAndRestart
from bench.quality.report import (
    DEFAULT_METHOD,
    HEADING,
    agent_table,
    aggregate,
    prefix_ceiling_note,
    prefix_goal,
    write_section,
)
from bench.quality.run import evaluate
from bench.quality.text import MODEL, Probe
from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.conversation import parse_conversation
from proxy.jsonio import dumps
from proxy.synthetic.registry import tool_specs

COUNTERS = shared_counters()
COUNTER = COUNTERS.for_model(MODEL)
SCOPE = "bench"


def _snapshot(seed: int) -> list[bytes]:
    return [
        dumps([r.body, [p.__dict__ for p in r.probes]])
        for s in generate(seed, growing_turns=12)
        for r in s.requests
    ]


def test_generator_is_deterministic_and_seeded() -> None:
    first = _snapshot(5)
    assert first == _snapshot(5)
    assert first != _snapshot(6)


def test_generated_conversations_are_valid_and_answerable() -> None:
    for scenario in generate(2, growing_turns=30):
        for request in scenario.requests:
            messages = request.body["messages"]
            assert not parse_conversation(messages).problems, scenario.key
            text = dumps(messages).decode()
            for probe in request.probes:
                assert probe.evidence in text, (scenario.key, probe)
                assert probe.evidence not in probe.question
                assert probe.evidence not in probe.superseded
        assert scenario.requests[-1].probes, scenario.key


def _exchange(content: str) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return [
        {"role": "system", "content": "Be precise."},
        {"role": "user", "content": "Look it up."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": content},
        {"role": "user", "content": "What is the code?"},
    ]


def _body(messages: list[dict[str, Any]], read_tool: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "messages": messages}
    if read_tool:
        body["tools"] = OPENAI_CHAT.synthetic_tools(tool_specs(20_000))
    return body


async def test_judge_counts_a_broken_tool_pair() -> None:
    original = _body(_exchange("code QX-7731"))
    split = _body([m for m in original["messages"] if m["role"] != "tool"])
    probe = Probe("code?", "QX-7731")
    intact = await Judge(COUNTER, 10_000).judge(original, Result(original), [probe])
    broken = await Judge(COUNTER, 10_000).judge(original, Result(split), [probe])
    assert intact.broken_pairs == 0 and intact.reach == ["inline"]
    assert broken.broken_pairs == 1 and broken.reach == ["missing"]


async def test_evidence_only_counts_when_the_read_tool_can_return_it() -> None:
    store = MemoryStore(b"secret")
    original = _body(_exchange("the code is QX-7731; " + "filler " * 50))
    stored = original["messages"][3]["content"]
    known = store.artifact_id(SCOPE, stored)
    ok = await store.put_many(
        SCOPE, {known: NewArtifact(stored, "tool_result")}, ttl_seconds=60, max_per_scope=10
    )
    assert ok == {known}
    unknown = store.artifact_id(SCOPE, "never stored")

    def prepared(artifact_id: str, read_tool: bool) -> dict[str, Any]:
        messages = [dict(m) for m in original["messages"]]
        messages[3]["content"] = f"[ctxproxy: tool result offloaded as artifact {artifact_id}]"
        return _body(messages, read_tool)

    probe = Probe("code?", "QX-7731")
    cases = {
        (known, True, SCOPE): "artifact",
        (known, False, SCOPE): "missing",  # no read tool offered: the model cannot read it
        (unknown, True, SCOPE): "missing",  # referenced but not in the store
        (known, True, "other-tenant"): "missing",  # the store answers per scope
    }
    for (artifact_id, read_tool, scope), expected in cases.items():
        result = Result(prepared(artifact_id, read_tool), store, scope, 7)  # 7-char pages
        outcome = await Judge(COUNTER, 10_000).judge(original, result, [probe])
        assert outcome.reach == [expected], (artifact_id == known, read_tool, scope)


async def test_refusal_and_overrun_and_stale_values() -> None:
    original = _body(_exchange("old value AB-1 replaced by AB-2"))
    probe = Probe("value?", "AB-9", ("AB-1",))
    judge = Judge(COUNTER, 40)  # the request is ~49 tokens
    refused = await judge.judge(original, Result(None, note="refused"), [probe])
    assert refused.refused and not refused.over and refused.reach == ["missing"]
    sent = await judge.judge(original, Result(original), [probe])
    assert sent.over and sent.stale == 1


async def test_prefix_share_counts_whole_identical_messages() -> None:
    judge = Judge(COUNTER, 10_000)
    first = _body(_exchange("result one"))
    grown = _body([*first["messages"], {"role": "assistant", "content": "Noted."}])
    rewritten = _body([dict(m) for m in grown["messages"]])
    rewritten["messages"][3]["content"] = "[ctxproxy: tool result cleared to save context]"
    a = await judge.judge(first, Result(first), [])
    b = await judge.judge(grown, Result(grown), [])
    c = await judge.judge(grown, Result(rewritten), [])
    assert a.prompt_tokens == 0  # nothing to reuse: left out of the share
    assert b.prefix_tokens == sum(COUNTER.count_message(m) for m in first["messages"])
    assert b.break_cause is None
    assert c.prefix_tokens == sum(COUNTER.count_message(m) for m in first["messages"][:3])
    assert c.break_cause == "clear_tool_results"


async def test_fill_and_restart_appends_until_full_then_restarts_at_the_current_turn() -> None:
    session = FillAndRestart(COUNTER).session(90)
    system = {"role": "system", "content": "You are terse."}
    messages: list[Any] = [system]
    sent: list[list[Any]] = []
    for turn in range(6):
        messages = [
            *messages,
            {"role": "user", "content": f"question {turn} " + "word " * 12},
            {"role": "assistant", "content": f"answer {turn}"},
        ]
        result = await session.prepare(_body(messages))
        assert result.body is not None
        sent.append(result.body["messages"])
    restarts = [i for i in range(1, len(sent)) if sent[i][: len(sent[i - 1])] != sent[i - 1]]
    assert restarts, "the history outgrew 90 tokens, so it must have restarted"
    for i in restarts:
        assert sent[i] == [system, *messages[2 * i + 1 : 2 * i + 3]]
    for i in set(range(1, len(sent))) - set(restarts):
        assert sent[i] == [*sent[i - 1], *messages[2 * i + 1 : 2 * i + 3]]


async def test_default_preset_smoke_run() -> None:
    scenario = growing(3, turns=8)
    records, methods = await evaluate([scenario], [900], COUNTERS, shared_catalog(), litellm=False)
    assert "sliding window" in methods and DEFAULT_METHOD in methods
    row = aggregate(r for r in records if r.method == DEFAULT_METHOD)
    assert row.requests == 8 and row.over == 0 and row.broken == 0
    note = prefix_ceiling_note(records, [900])
    assert "900: ctxproxy default " in note and ", reference " in note


def test_write_section_keeps_the_other_sections(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    path.write_text(f"# Results\n\n## Overhead\n\nfast\n\n{HEADING}\n\nold\n\n## Later\n\nkeep\n")
    write_section(path, "new table")
    text = path.read_text()
    assert "## Overhead\n\nfast" in text and "## Later\n\nkeep" in text
    assert "new table" in text and "old" not in text
    write_section(tmp_path / "fresh.md", "first")
    assert HEADING in (tmp_path / "fresh.md").read_text()


def test_agent_session_has_large_valid_turns_with_answerable_probes() -> None:
    scenario = agent_session(4, turns=12)
    sizes = [COUNTER.count_request(r.body) for r in scenario.requests]
    growth = sorted(b - a for a, b in pairwise(sizes))
    assert growth[len(growth) // 2] >= 1_800  # about 2k tokens a turn
    for request in scenario.requests:
        messages = request.body["messages"]
        assert not parse_conversation(messages).problems
        assert all(len(m["content"]) < 8_000 for m in messages if m["role"] == "tool")
        text = dumps(messages).decode()
        assert all(p.evidence in text for p in request.probes)
    assert dumps(scenario.requests[0].body) != dumps(agent_session(5, turns=12).requests[0].body)


async def test_agent_table_reports_the_share_next_to_the_reference() -> None:
    scenario = agent_session(1, turns=10)
    records, methods = await evaluate(
        [scenario], [8_000], COUNTERS, shared_catalog(), litellm=False, only=("default",)
    )
    assert methods[-1] == DEFAULT_METHOD
    table = agent_table(records, methods, [8_000], AGENT_KEY)
    assert "| 8,000 | fill-and-restart (reference) |" in table and "+0.0 pts" in table
    goal = prefix_goal(records, {AGENT_KEY: [8_000]})
    assert goal.detail.startswith("F@8,000: ")
    row = aggregate(r for r in records if r.method == DEFAULT_METHOD)
    assert row.over == 0 and row.broken == 0 and row.reachable == row.probes
