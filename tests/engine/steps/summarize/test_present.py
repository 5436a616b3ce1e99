"""engine/steps/summarize/present.py: the extract's summary states the present, in sections."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from proxy.engine.steps.summarize.extract import SpanText, values
from proxy.engine.steps.summarize.present import ORDER, manifest, summary, tail


def words(text: str) -> int:
    return len(text.split())


SPAN = [
    SpanText("Note: the deploy code is ZETA-4821.", "", 1),
    SpanText("Noted: deploy code = ZETA-4821.", "", 1),
    SpanText("For the record, the port of api is 8080.", "", 2),
    SpanText("Correction on api: its port changed. Please use 9090 from now on; the earlier "
             "figure 8080 is out of date.", "", 5),
    SpanText("Correction: the deploy code is now ZETA-9907.", "", 14),
    SpanText("We decided to ship on Friday with flag beta-3.", "", 15),
    SpanText("Should we bump the cache size?", "", 15),
    SpanText("$ pytest -q tests/a.py\nE   assert 1 == 2\n1 failed, 3 passed in 0.2s", "c1", 16),
    SpanText("$ make build\nbuild ok", "c2", 17),
]


def test_each_fact_states_its_current_value_with_the_corrected_one_on_its_line() -> None:
    out = summary(SPAN, "", 400, words, ["src/a.py"])
    assert "- deploy code: ZETA-9907 (was ZETA-4821, corrected at turn 14)" in out
    assert "- port of api: 9090 (was 8080, corrected at turn 5)" in out
    for line in out.splitlines():
        if "ZETA-4821" in line or "8080" in line:
            assert "(was " in line, line


def test_the_sections_come_in_order() -> None:
    out = summary(SPAN, "", 400, words, ["src/a.py"]).splitlines()
    titles = [t for t in ORDER if any(line.startswith(t) for line in out)]
    places = [next(i for i, line in enumerate(out) if line.startswith(t)) for t in titles]
    assert places == sorted(places) and len(titles) >= 6
    assert "- $ pytest -q tests/a.py -> 1 failed, 3 passed in 0.2s" in out
    assert "- $ make build -> build ok" in out
    assert "- E assert 1 == 2" in out
    assert "- We decided to ship on Friday with flag beta-3." in out
    assert "- Should we bump the cache size?" in out


def test_a_tight_budget_keeps_the_facts_first_and_says_what_is_left_out() -> None:
    out = summary(SPAN, "", 40, words, ["src/a.py"])
    assert words(out) <= 40
    assert "ZETA-9907" in out and "9090" in out
    assert "Only in the archive:" in out
    assert manifest(out)["facts_kept"] == ["deploy code", "port of api"]


def test_the_manifest_lists_facts_kept_and_superseded() -> None:
    found = manifest(summary(SPAN, "", 400, words))
    assert found["facts_kept"] == ["deploy code", "port of api"]
    assert found["facts_superseded"] == [
        "deploy code: ZETA-9907 (was ZETA-4821, corrected at turn 14)",
        "port of api: 9090 (was 8080, corrected at turn 5)",
    ]
    assert found["archive_only"] == ""


def test_an_error_of_a_run_that_later_passed_is_resolved() -> None:
    span = [SpanText("$ pytest\nE   assert 1 == 2\n1 failed", "c1", 1),
            SpanText("$ pytest\n3 passed", "c2", 2)]
    out = summary(span, "", 200, words)
    assert "E assert 1 == 2" not in out.split("Other details:")[0]
    assert "- $ pytest -> 3 passed" in out


NAMES = st.sampled_from(["port", "owner", "region", "quota", "deadline", "build id"])


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.tuples(NAMES, st.integers(1000, 9999), st.booleans()), min_size=1, max_size=12),
    st.integers(120, 600),
)
def test_every_current_value_shows_and_no_stale_value_stands_alone(
    events: list[tuple[str, int, bool]], budget: int
) -> None:
    texts: list[SpanText] = []
    current: dict[str, str] = {}
    for turn, (name, number, corrected) in enumerate(events, start=1):
        value = f"V-{number}"
        said = f"Correction: the {name} is now {value}." if corrected else (
            f"For the record, the {name} is {value}.")
        texts.append(SpanText(said, "", turn))
        current[name] = value
    out = summary(texts, "", budget, words)
    assert out == summary(texts, "", budget, words)
    assert words(out) <= budget
    for name, value in current.items():
        assert f"- {name}: {value}" in out
    stale = {f"V-{n}" for _, n, _ in events} - set(current.values())
    for line in out.splitlines():
        if values(line) & stale:
            assert " (was " in line, line


def test_fold_notes_and_lines_with_a_superseded_value_are_left_out_of_the_details() -> None:
    span = [
        SpanText("For the record, the owner of Blue Falcon is Jane Doe.", "", 1),
        SpanText("Jane Doe signed ticket TKT-123456 today.", "", 2),
        SpanText("Correction on Blue Falcon: its owner changed. Please use Maria Lopez from now "
                 "on; the earlier figure Jane Doe is out of date.", "", 3),
        *(SpanText(f"copied src/a{k}.py", "", 4) for k in range(5)),
    ]
    out = summary(span, "", 500, words)
    assert "- owner of Blue Falcon: Maria Lopez (was Jane Doe, corrected at turn 3)" in out
    assert [line for line in out.splitlines() if "Jane Doe" in line] == [
        "- owner of Blue Falcon: Maria Lopez (was Jane Doe, corrected at turn 3)"
    ]
    assert "lines like" not in out


def test_nothing_worth_keeping_is_an_empty_summary() -> None:
    assert summary([SpanText("We talked about the weather.", "", 1)], "", 200, words) == ""


def test_the_tail_states_new_facts_and_corrects_the_summarys_beside_the_old_value() -> None:
    stated = summary(SPAN[:5], "", 400, words)
    later = [
        SpanText("Correction on api: its port changed. Please use 7070 from now on; the earlier "
                 "figure 9090 is out of date.", "", 20),
        SpanText("For the record, the owner of api is Dana Kim.", "", 21),
    ]
    out = tail(later, stated, 200, words).splitlines()
    assert out[:2] == [
        "- port of api: 7070 (was 9090, corrected at turn 20)",
        "- owner of api: Dana Kim",
    ]
    assert tail(later, "", 200, words) == ""  # a dropped summary: nothing to change
