"""engine/summarizer.py: the strict shape of a summary, its rendering, transcript batches."""

from __future__ import annotations

import json

import pytest
from context_harness import counter

from proxy.engine.steps.summarize.summarizer import (
    SummarizerError,
    SummaryShape,
    batches,
    parse_summary,
    render,
)

GOOD = {
    "facts": [{"name": "port", "value": "9090"}],
    "decisions": ["use redis"],
    "open_questions": ["who owns REL-1?"],
    "resources": ["src/a.py"],
    "errors": ["E501 line too long"],
}


def test_a_valid_answer_renders_every_section() -> None:
    shape = parse_summary(json.dumps(GOOD))
    assert render(shape) == (
        "Facts (current values):\n- port: 9090\nDecisions:\n- use redis\nOpen questions:\n"
        "- who owns REL-1?\nErrors seen:\n- E501 line too long\nFiles/resources touched: src/a.py"
    )
    fenced = f"```json\n{json.dumps(GOOD)}\n```"
    assert parse_summary(fenced) == shape
    empty = {key: [] for key in GOOD}
    assert render(parse_summary(json.dumps(empty))) == ""


@pytest.mark.parametrize(
    "answer",
    [
        "The summary: all good.",
        json.dumps({**GOOD, "extra": []}),
        json.dumps({}),
        json.dumps({"summary": "all good"}),
        "Here it is: {not json}",
        "Sure: {} and {}",
        json.dumps({**GOOD, "facts": [{"name": "x"}]}),
        json.dumps({**GOOD, "facts": ["port is 9090"]}),
        json.dumps({**GOOD, "decisions": [{"a": 1}]}),
        json.dumps([GOOD]),
        json.dumps({**GOOD, "errors": ["x" * 2001]}),
    ],
)
def test_anything_else_is_an_invalid_answer(answer: str) -> None:
    with pytest.raises(SummarizerError) as caught:
        parse_summary(answer)
    assert caught.value.failure == "invalid"


def test_only_what_loses_nothing_is_let_through() -> None:
    shape = parse_summary(json.dumps(GOOD))
    missing = {k: v for k, v in GOOD.items() if k != "errors"}
    assert parse_summary(json.dumps(missing)) == shape.model_copy(update={"errors": []})
    assert parse_summary(json.dumps({"facts": []})) == SummaryShape()  # a list left out: none
    wrapped = f"Here is the summary:\n{json.dumps(GOOD)}\nI hope it helps."
    assert parse_summary(wrapped) == shape
    assert parse_summary(f"{json.dumps(GOOD)} (as asked)") == shape  # the object comes first
    assert parse_summary(f"Summary: {json.dumps(GOOD)}.") == shape  # a full stop right after it


def test_batches_keep_order_and_size() -> None:
    def count(text: str) -> int:
        return counter().count_text(text)

    entries = [f"user: line {i} " + "word " * 20 for i in range(30)]
    out = batches(entries, 100, count)
    assert len(out) > 1 and "\n".join(out) == "\n".join(entries)
    assert all(count(batch) <= 100 for batch in out)
    [cut] = batches(["x " * 5000], 50, count)
    assert cut.endswith("...[cut]") and count(cut) < 5000
    assert batches([], 10, count) == []


def test_errors_say_what_failed_and_resources_are_listed_comma_separated() -> None:
    with pytest.raises(SummarizerError) as caught:
        parse_summary("not json")
    assert caught.value.failure == "invalid"
    assert str(caught.value) == "the summary is not a JSON object of the expected shape"
    with pytest.raises(SummarizerError) as caught:
        parse_summary('{"facts": "not a list"}')
    assert str(caught.value).startswith("the summary is not the expected JSON: ")
    assert str(SummarizerError("timeout", "too slow")) == "too slow"
    shape = parse_summary(json.dumps({**{key: [] for key in GOOD}, "resources": ["a", "b"]}))
    assert render(shape) == "Files/resources touched: a, b"


def test_batches_fill_to_exactly_the_limit() -> None:
    """One token per character, plus one per entry (its line break)."""
    assert batches(["aaaa", "bbbb"], 10, len) == ["aaaa\nbbbb"]  # 5 + 5: exactly the limit
    assert batches(["aaaa"] * 4, 10, len) == ["aaaa\naaaa"] * 2
    assert batches(["x" * 9], 10, len) == ["x" * 9]  # costs exactly the limit: not cut
    assert batches(["x" * 50], 10, len) == ["x" * 30 + " ...[cut]"]


@pytest.mark.parametrize(("after", "count"), [("abcd", 1), ("abcdefgh", 2)])
def test_a_cut_entry_costs_what_it_counts_plus_one(after: str, count: int) -> None:
    """At 4 characters a token, an entry of 80 is cut to 60 + " ...[cut]" (69 characters, 17
    tokens): it costs 18 of the 20, so a next entry costing 2 still fits and one costing 3
    does not."""
    def quarter(text: str) -> int:
        return len(text) // 4

    assert len(batches(["y" * 80, after], 20, quarter)) == count
