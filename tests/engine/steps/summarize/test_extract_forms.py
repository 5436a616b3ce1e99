"""engine/extract.py: which lines share a form and fold, and how folded lines rank.

(Split from test_extract.py, which holds the digest's other rules.)"""

from __future__ import annotations

import pytest
from context_harness import counter

from proxy.engine.steps.summarize.extract import SpanText, _ranked, digest


def count(text: str) -> int:
    return counter().count_text(text)


def words(text: str) -> int:
    return len(text.split())


def _digest(lines: list[str], query: str = "", budget: int = 500) -> list[str]:
    return digest([SpanText(line) for line in lines], query, budget, count).splitlines()


def _order(lines: list[str], query: frozenset[str] = frozenset()) -> list[str]:
    return [c.sentence for c in _ranked([SpanText(line) for line in lines], query)]


@pytest.mark.parametrize(
    "lines",
    [
        # exactly REPEATED (3) lines are enough
        ["PASSED tests/test_a1.py", "PASSED tests/test_a2.py", "PASSED tests/test_a3.py"],
        # words differ, even right before a full stop
        ["Downloaded 3 files from mirror.", "Downloaded 5 files from cache.",
         "Downloaded 8 files from origin."],
        # whatever the word (one that starts with an X too)
        ["built 3 targets for Android", "built 4 targets for Linux", "built 5 targets for Xcode"],
        # only paths differ, no number at all
        ["compiling src/alpha.py", "compiling src/beta.py", "compiling src/gamma.py"],
    ],
)
def test_lines_that_differ_only_in_numbers_paths_and_words_fold(lines: list[str]) -> None:
    out = _digest(lines)
    assert out == [f"- {lines[0]}", f"- {lines[1]}", f"- 3 lines like: {lines[2]}"]


@pytest.mark.parametrize(
    "lines",
    [
        # error messages without a number, path or identifier are not output lines
        ["Connection refused by Alice.", "Connection refused by Bob.",
         "Connection refused by Carol."],
        # a lone number is no form
        ["404", "500", "503"],
        # an upper-case word stays as it is: one FAILED line is no PASSED line
        ["PASSED tests/test_a1.py", "FAILED tests/test_a2.py", "PASSED tests/test_a3.py"],
        # even a one-letter one (a compass point) is not a word like `gusting`
        ["wind 12 knots W", "wind 14 knots gusting", "wind 9 knots gusting"],
        # the values of different keys (`size: 3`, `step: 4`), whatever letter a key starts with
        ["État: 3 ok", "Étape: 4 ok", "Échec: 5 ok"],
    ],
)
def test_lines_not_of_one_output_form_are_not_folded(lines: list[str]) -> None:
    assert _digest(lines) == [f"- {line}" for line in lines]


def test_failed_and_passed_lines_fold_apart() -> None:
    lines = [f"tests/test_m.py::test_{i} {'FAILED' if i % 2 else 'PASSED'}" for i in range(8)]
    notes = [line for line in _digest(lines) if "lines like" in line]
    assert notes == ["- 4 lines like: tests/test_m.py::test_6 PASSED",
                     "- 4 lines like: tests/test_m.py::test_7 FAILED"]


def test_a_form_too_rare_to_fold_does_not_stop_the_next_from_folding() -> None:
    lines = ["step 1 ran fine", "step 2 ran fine"]  # two: not folded
    lines += [f"copied src/a{i}.py" for i in range(3)]
    assert _digest(lines) == [
        "- step 1 ran fine", "- step 2 ran fine",
        "- copied src/a0.py", "- copied src/a1.py", "- 3 lines like: copied src/a2.py",
    ]


def test_folded_lines_rank_their_best_then_a_second_of_each_form_then_the_rest() -> None:
    job = [f"job {i} ended {word}" for i, word in enumerate(("timeout", "fine", "fine"), 1)]
    failed = [f"FAILED tests/test_b{i}.py" for i in range(1, 4)]
    plain = "it took 3 tries"  # of its own form: never folded
    assert _order([*job, *failed, plain]) == [
        "3 lines like: FAILED tests/test_b3.py",
        "3 lines like: job 1 ended timeout",  # the best of its form, not the latest
        plain,  # after every line not folded:
        "FAILED tests/test_b2.py",  # the second of each form
        "job 3 ended fine",
        "FAILED tests/test_b1.py",  # then the others
        "job 2 ended fine",
    ]


def test_a_folded_line_that_shares_a_rare_word_with_the_query_ranks_with_the_seconds() -> None:
    job = [f"job {i} ended {w}" for i, w in enumerate(("timeout", "timeout", "mango", "fine"), 1)]
    failed = [f"FAILED tests/test_b{i}.py" for i in range(1, 5)]
    assert _order([*job, *failed], frozenset({"mango"})) == [
        "4 lines like: FAILED tests/test_b4.py",
        "4 lines like: job 2 ended timeout",
        "FAILED tests/test_b3.py",
        "job 1 ended timeout",
        "job 3 ended mango",  # the query's one word: before the other folded lines
        "FAILED tests/test_b2.py",
        "FAILED tests/test_b1.py",
        "job 4 ended fine",
    ]
