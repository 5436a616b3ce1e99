"""engine/steps/summarize/facts.py: one entry per subject, at its latest value."""

from __future__ import annotations

import pytest

from proxy.engine.steps.summarize.extract import SpanText
from proxy.engine.steps.summarize.facts import ledger, statement


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("March 3, 2026", "April 9, 2027"),
        ("Jane Doe", "Maria Lopez"),
        ("$1,234,000", "$2,100,500"),
        ("CTR-1234567", "CTR-7654321"),
        ("450 ms", "320 ms"),
    ],
)
def test_a_correction_naming_the_old_value_replaces_it_whole(old: str, new: str) -> None:
    texts = [
        SpanText(f"Some prose. For the record, the launch date of Blue Falcon is {old}.", "", 1),
        SpanText(f"Correction on Blue Falcon: its launch date changed. Please use {new} from "
                 f"now on; the earlier figure {old} is out of date.", "", 3),
    ]
    [fact] = ledger(texts)
    assert fact.line() == f"launch date of Blue Falcon: {new} (was {old}, corrected at turn 3)"
    assert fact.superseded() == [old]


def test_a_restatement_with_another_value_is_a_change_and_the_same_value_is_none() -> None:
    texts = [SpanText("The deploy code is ZETA-1.", "", 1), SpanText("deploy code = ZETA-1", "", 2),
             SpanText("The deploy code is ZETA-2.", "", 4)]
    [fact] = ledger(texts)
    assert fact.line() == "deploy code: ZETA-2 (was ZETA-1, changed at turn 4)"
    assert fact.line(history=False) == "deploy code: ZETA-2"


def test_two_earlier_values_are_both_named_latest_first() -> None:
    texts = [
        SpanText("The port is 8080.", "", 1),
        SpanText("Correction: the port is now 9090.", "", 2),
        SpanText("Correction: the port is now 7070.", "", 5),
    ]
    [fact] = ledger(texts)
    assert fact.line() == "port: 7070 (was 9090, corrected at turn 5; before that 8080)"


@pytest.mark.parametrize(
    "sentence",
    [
        "cursor_queue = await queue.fetch(cursor, timeout=9)",  # code
        "It is 42.",  # a pronoun
        "The plan is good.",  # no value
        "Is the port 8080?",  # a question
        "The port of the service we talked about last week in the long meeting is 80.",
    ],
)
def test_what_states_no_fact(sentence: str) -> None:
    assert statement(sentence) is None


def test_tool_output_states_facts_only_in_sentences_of_words() -> None:
    texts = [
        SpanText('{\n  "notes": "For the record, the quota of team A is 40 GB.",\n  "x": 1\n}',
                 "call_1", 1),
        SpanText("retries = 5\nAt site KEL, the uptime over the study period was 84.10%.",
                 "call_2", 2),
        SpanText("The region is EU-2.", "", 3),
    ]
    facts = ledger(texts)
    assert [(f.subject, f.value, f.said) for f in facts] == [
        ("quota of team A", "40 GB", False),
        ("At site KEL, the uptime over the study period", "84.10%", False),
        ("region", "EU-2", True),
    ]
