"""The category scenarios (bench/quality/categories_gen.py): the source generators' bytes are
untouched, each category has probes, and each probe's evidence is in the unprepared prompt."""

from __future__ import annotations

from bench.quality.categories_gen import CATEGORIES, SOURCES, build, build_all
from bench.quality.judge import message_texts
from proxy.formats.openai_chat.conversation import parse_conversation
from proxy.jsonio import dumps


def test_building_leaves_the_source_scenarios_byte_identical() -> None:
    before = {k: dumps(make(2).requests[-1].body) for k, make in SOURCES.items()}
    build_all(2)
    assert {k: dumps(make(2).requests[-1].body) for k, make in SOURCES.items()} == before


def test_every_category_has_probes_whose_evidence_is_in_the_prompt() -> None:
    for case in build_all(1):
        text = "\n".join(t for m in case.body["messages"] for t in message_texts(m))
        for category in CATEGORIES:
            assert case.probes[category], (case.key, category)
            for probe in case.probes[category]:
                assert probe.evidence in text, (case.key, category, probe.evidence)
        assert not parse_conversation(case.body["messages"]).problems


def test_the_continuation_is_the_last_user_request_verbatim_and_decisions_come_before() -> None:
    case = build("coding", 3)
    messages = case.body["messages"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users[-1] == case.probes["continuation"][0].evidence
    assert messages[-1]["role"] == "tool"  # the agent is already working on it
    decided = [i for i, u in enumerate(users) if u.startswith("Decision for the record")]
    assert len(decided) == len(case.probes["decisions"]) == 3
    assert max(decided) < len(users) - 1


def test_the_same_seed_gives_the_same_cases() -> None:
    assert [dumps(c.body) for c in build_all(4)] == [dumps(c.body) for c in build_all(4)]


def test_the_json_scenario_reads_a_log_with_a_planted_error_early() -> None:
    case = build("json-logs", 1)
    code = case.probes["facts"][-1].evidence
    assert code.startswith("GW-")
    results = [m["content"] for m in case.body["messages"] if m["role"] == "tool"]
    log = next(r for r in results if code in r)
    assert len(log.splitlines()) == 320 and results.index(log) < len(results) // 2
