"""engine/steps/summarize/current.py: the request's facts now, and frozen fact lines at present."""

from __future__ import annotations

from typing import Any

from context_harness import assistant, call, make_ctx, policy, result, system, user
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from proxy.engine.steps.summarize.current import (
    MAX_SCANNED_CHARS,
    at_present,
    record_fields,
    request_facts,
    stale_lines,
    stated,
)
from proxy.engine.steps.summarize.extract import SpanText
from proxy.engine.steps.summarize.facts import ledger

CORRECTED = [
    SpanText("For the record, the approved budget of LUMHULSOL is 247,853.35 USD.", "", 1),
    SpanText("For the record, the port of api is 8080.", "", 2),
    SpanText("Correction on LUMHULSOL: its approved budget changed. Please use 196,817.78 USD "
             "from now on; the earlier figure 247,853.35 USD is out of date.", "", 55),
]


def facts_of(texts: list[SpanText]) -> dict[str, Any]:
    return {f.subject.lower(): f for f in ledger(texts)}


def test_a_frozen_fact_line_corrected_later_is_written_at_present() -> None:
    body = "\n".join([
        "Facts (current values):",
        "- approved budget of LUMHULSOL: 247,853.35 USD",
        "- port of api: 8080",
        "Other details:",
        "- [c1] For the record, the approved budget of LUMHULSOL is 247,853.35 USD.",
        "Files and ids touched: a.py, 247,853.35 USD, b.py",
    ])
    out = at_present(body, facts_of(CORRECTED)).splitlines()
    assert out == [
        "Facts (current values):",
        "- approved budget of LUMHULSOL: 196,817.78 USD (was 247,853.35 USD, corrected at "
        "turn 55)",
        "- port of api: 8080",
        "Other details:",
        "- [c1] For the record, the approved budget of LUMHULSOL is 247,853.35 USD. (corrected "
        "since: approved budget of LUMHULSOL: 196,817.78 USD)",
        "Files and ids touched: a.py, 247,853.35 USD (now 196,817.78 USD), b.py",
    ]
    assert stale_lines("\n".join(out), facts_of(CORRECTED)) == []
    assert stale_lines(body, facts_of(CORRECTED)) == [body.splitlines()[1], *body.splitlines()[4:]]


def test_a_text_without_a_superseded_value_is_left_as_it_is() -> None:
    body = "> - port of api: 8080\n> - owner: Jane"
    assert at_present(body, facts_of(CORRECTED)) == body
    assert at_present(body, {}) == body


def test_a_line_already_naming_the_correction_is_brought_to_the_latest_value() -> None:
    texts = [*CORRECTED, SpanText("Correction: the approved budget of LUMHULSOL is now "
                                  "99,000.00 USD.", "", 70)]
    line = "- approved budget of LUMHULSOL: 196,817.78 USD (was 247,853.35 USD, corrected)"
    [out] = at_present(line, facts_of(texts)).splitlines()
    assert out.startswith("- approved budget of LUMHULSOL: 99,000.00 USD (was 196,817.78 USD")


def test_the_facts_a_result_states_are_named_at_present() -> None:
    text = '{\n  "notes": "For the record, the approved budget of LUMHULSOL is 247,853.35 USD.",\n}'
    assert stated(text, {}) == ["approved budget of LUMHULSOL: 247,853.35 USD"]
    assert stated(text, facts_of(CORRECTED)) == [
        "approved budget of LUMHULSOL: 196,817.78 USD (was 247,853.35 USD, corrected at turn 55)"
    ]
    assert stated("x = 1\ny = 2", {}) == []
    assert stated(text + " " * MAX_SCANNED_CHARS, {}) == []


def test_the_request_ledger_reads_messages_and_results_and_knows_frozen_facts() -> None:
    messages = [
        system(),
        user("Task: audit. For the record, the port of api is 8080."),
        call("c0", "lookup", '{"id": "R1"}'),
        result("c0", '{\n  "notes": "For the record, the owner of Blue Falcon is Jane Doe.",\n}'),
        assistant("ok"),
        user("Correction on api: its port changed. Please use 9090 from now on; the earlier "
             "figure 8080 is out of date."),
        user("Correction on BIG: its size changed. Please use 7 GB from now on; the earlier "
             "figure 5 GB is out of date."),
    ]
    ctx = make_ctx(messages, policy())
    facts = request_facts(ctx)
    assert facts["port of api"].value == "9090"
    assert facts["owner of blue falcon"].value == "Jane Doe"
    assert "size of big" not in facts
    known = request_facts(ctx, [("size of BIG", "5 GB")])
    assert known["size of big"].value == "7 GB" and known["size of big"].superseded() == ["5 GB"]


NAMES = st.sampled_from(["port", "owner", "region", "quota", "deadline", "build id"])


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.tuples(NAMES, st.integers(1000, 9999), st.booleans()), min_size=1, max_size=12),
    st.integers(0, 12),
)
def test_no_line_written_at_present_names_a_superseded_value_without_the_current_one(
    events: list[tuple[str, int, bool]], frozen_at: int
) -> None:
    """A body frozen after `frozen_at` events (its facts as they stood then, plus a detail
    line per statement), written at present against all of them: every line that names a
    superseded value of the ledger names its current value on the same line."""
    texts: list[SpanText] = []
    for turn, (name, number, corrected) in enumerate(events, start=1):
        value = f"{name[:2].upper()}-{number}"  # a value of one subject only
        said = (f"Correction: the {name} is now {value}." if corrected
                else f"For the record, the {name} is {value}.")
        texts.append(SpanText(said, "", turn))
    then = ledger(texts[:frozen_at])
    body = "\n".join(["Facts (current values):", *(f"- {f.line()}" for f in then),
                      "Other details:", *(f"- {t.text}" for t in texts[:frozen_at])])
    now = facts_of(texts)
    out = at_present(body, now)
    assert out == at_present(body, now)
    assert stale_lines(out, now) == []
    for fact in then:
        if fact.subject.lower() in now:
            assert f"- {fact.subject}: {now[fact.subject.lower()].value}" in out


def test_a_record_fetched_again_with_a_changed_field_supersedes_the_old_value() -> None:
    first = '{\n  "order_id": "ORD-1", "status": "in transit", "tracking_number": "TRK-6DC8"\n}'
    again = '{\n  "order_id": "ORD-1", "status": "reshipped", "tracking_number": "TRK-X94Q"\n}'
    other = '{\n  "order_id": "ORD-2", "tracking_number": "TRK-0000"\n}'
    [fact] = record_fields([(first, 2), (other, 3), (again, 5), ("not json", 6), ("[1]", 7)])
    assert fact.line() == "tracking_number of ORD-1: TRK-X94Q (was TRK-6DC8, changed at turn 5)"
    facts = {fact.subject.lower(): fact}
    body = 'Files and ids touched: ORD-1, TRK-6DC8, TRK-X94Q\n- [c1] "tracking_number": "TRK-6DC8",'
    assert at_present(body, facts) == (
        "Files and ids touched: ORD-1, TRK-6DC8 (now TRK-X94Q), TRK-X94Q\n"
        '- [c1] "tracking_number": "TRK-6DC8", (corrected since: tracking_number of ORD-1: '
        'TRK-X94Q)'
    )
