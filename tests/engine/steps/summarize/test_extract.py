"""engine/extract.py: the deterministic, query-aware digest of a dropped span."""

from __future__ import annotations

import re

import pytest
from context_harness import counter
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from proxy.engine.steps.summarize.extract import (
    MAX_SENTENCE_CHARS,
    SpanText,
    _candidate,
    _query_words,
    _ranked,
    digest,
    resources,
    resources_line,
    sentences,
    updates,
)

PROSE = "We talked about the weather and how nice the garden looks this time of year."
FACT = "For the record, the approved budget of KALOMIRA is 12,300.00 EUR."
FIX = "Correction on KALOMIRA: its approved budget changed to 15,000.00 EUR."


def count(text: str) -> int:
    return counter().count_text(text)


def test_prose_is_never_kept_facts_errors_and_paths_are() -> None:
    texts = [
        SpanText(f"{PROSE} {FACT}"),
        SpanText("Traceback (most recent call last): ValueError in src/app.py", "call_1"),
        SpanText(PROSE),
    ]
    out = digest(texts, "", 500, count, ["src/app.py"])
    assert out.splitlines() == [
        "Touched: src/app.py",
        f"- {FACT}",
        "- [call_1] Traceback (most recent call last): ValueError in src/app.py",
    ]
    assert digest([SpanText(PROSE)], "", 500, count) == ""


def test_a_restated_value_keeps_only_its_latest_form() -> None:
    old = "The staging port is 8080."
    new = "The staging port is 9090."
    out = digest([SpanText(old), SpanText(PROSE), SpanText(new)], "", 500, count)
    assert out == f"- {new}"


def test_the_budget_is_respected_and_the_best_go_first_written_in_span_order() -> None:
    texts = [SpanText(f"Item {i} has value {i * 7}.") for i in range(200)]
    texts.insert(50, SpanText("FAILED tests/test_core.py::test_merge - AssertionError"))
    for budget in (0, 5, 20, 60, 300):
        out = digest(texts, "", budget, count)
        assert count(out) <= budget
    out = digest(texts, "", 40, count)
    assert out.splitlines()[0].startswith("- FAILED tests/test_core.py")  # the error wins
    kept = [line for line in digest(texts, "", 300, count).splitlines() if "Item" in line]
    numbers = [int(re.findall(r"Item (\d+)", line)[0]) for line in kept]  # "N lines like: Item"
    assert len(numbers) > 2 and numbers == sorted(numbers)  # written in span order


def test_the_query_decides_between_equal_candidates() -> None:
    texts = [SpanText("The owner of REC-111111 is Amo Belk."),
             SpanText("The owner of REC-222222 is Cari Dunt.")]
    one_line = count("- The owner of REC-111111 is Amo Belk.") + 1
    assert "REC-222222" in digest(texts, "", one_line, count)  # later wins a tie
    assert "REC-111111" in digest(texts, "who owns REC-111111 (Belk)?", one_line, count)


def test_resources_of_a_tool_call_leave_out_its_own_ids() -> None:
    call = (
        '{"id":"call_ab12","arguments":"{\\"path\\": \\"src/x/y.py\\", '
        '\\"rec\\": \\"REC-9Z9Z\\"}"}'
    )
    assert resources(call, ("call_ab12",)) == ["src/x/y.py", "REC-9Z9Z"]


def test_long_sentences_are_shortened() -> None:
    [one] = sentences("x" * (MAX_SENTENCE_CHARS * 2))
    assert len(one) == MAX_SENTENCE_CHARS and one.endswith("...")
    assert sentences("A is 1.  B is 2.\n\nC is 3") == ["A is 1.", "B is 2.", "C is 3"]


@settings(max_examples=examples(60), deadline=None)
@given(
    parts=st.lists(st.text(min_size=0, max_size=300), max_size=12),
    query=st.text(max_size=80),
    budget=st.integers(0, 400),
)
def test_deterministic_and_within_budget(parts: list[str], query: str, budget: int) -> None:
    texts = [SpanText(p, f"c{i}" if i % 2 else "") for i, p in enumerate(parts)]
    out = digest(texts, query, budget, count)
    assert out == digest(list(texts), query, budget, count)
    assert count(out) <= budget


def test_a_corrected_value_never_shows_without_its_correction() -> None:
    old = "For the record, the latency objective of KALOMIRA is 120 ms."
    fix = "Please use 95 ms from now on; the earlier figure 120 ms is out of date."
    texts = [SpanText(old), SpanText(PROSE), SpanText(fix)]
    query = "the latency objective of KALOMIRA for the record"  # favours the old statement
    one_line = count(f"- {fix}") + 1
    assert digest(texts, query, one_line, count) == f"- {fix}"
    both = digest(texts, query, 500, count)
    assert both == f"- {old}\n- {fix}"


def test_a_correction_corrected_again_needs_the_later_one() -> None:
    old = "For the record, the port of GATE is 8080."
    fix = "Please use 9090 from now on; the earlier figure 8080 is out of date."
    again = "Please use 7070 from now on; the earlier figure 9090 is out of date."
    texts = [SpanText(t) for t in (old, fix, again)]
    for budget in range(0, 80, 3):
        lines = digest(texts, "port of GATE 8080 9090", budget, count).splitlines()
        shown = " ".join(lines)
        if "8080" in shown or "9090" in shown:
            assert "7070" in shown, (budget, lines)


STATED = f"Touched: src/app.py\n- {FACT}\n- [call_1] port: 8080\n- the owner is Dana"


def test_updates_keep_what_restates_or_corrects_the_stated_digest_only() -> None:
    texts = [
        SpanText("The weather is 21 degrees today."),  # a fact the digest never stated
        SpanText("port: 9090", "call_7"),  # the same key as a stated line, another value
        SpanText(FIX),  # a correction naming a stated name (KALOMIRA)
        SpanText("Correction: the garden party moved to 18:00."),  # names nothing stated
    ]
    assert updates(texts, STATED, 500, count).splitlines() == [
        "- [call_7] port: 9090",
        f"- {FIX}",
    ]


def test_updates_are_empty_without_a_change_or_a_stated_digest() -> None:
    texts = [SpanText("The weather is 21 degrees today."), SpanText(PROSE)]
    assert updates(texts, STATED, 500, count) == ""
    assert updates([SpanText("port: 9090")], "", 500, count) == ""


def test_updates_keep_the_latest_of_each_and_fit_the_budget_best_first() -> None:
    texts = [SpanText("port: 9090"), SpanText(FIX), SpanText("port: 9191")]
    assert updates(texts, STATED, 500, count).splitlines() == [f"- {FIX}", "- port: 9191"]
    room = count(f"- {FIX}") + 1
    assert updates(texts, STATED, room, count) == f"- {FIX}"  # the correction ranks first
    assert updates(texts, STATED, 0, count) == ""


def test_updates_charge_each_line_and_its_line_break_against_the_budget() -> None:
    stated = "- port of alpha: 1111\n- port of bravo: 2222\n- port of gamma: 3333"
    texts = [SpanText(f"port of {name}: {n}") for name, n in (("alpha", 4444), ("bravo", 5555),
                                                              ("gamma", 6666))]
    costs = [count(f"- {t.text}") + 1 for t in texts]
    assert len(set(costs)) == 1  # the same price each, so only the sum decides
    [cost] = set(costs)
    assert len(updates(texts, stated, 3 * cost, count).splitlines()) == 3
    assert len(updates(texts, stated, 2 * cost, count).splitlines()) == 2
    assert len(updates(texts, stated, 2 * cost - 1, count).splitlines()) == 1
    assert len(updates(texts, stated, cost - 1, count).splitlines()) == 0


def _test_run(k: int) -> str:
    """A pasted pytest run: its command line, ten failed tests, the assertion's detail."""
    lines = [f"$ pytest tests/test_mod{k}.py -q"]
    lines += [f"tests/test_mod{k}.py::test_case_{k}_{i} FAILED [{10 * i + k}%]" for i in range(10)]
    lines.append(f"E   AssertionError: expected {100 + k} == {200 + k}")
    return "\n".join(lines)


def test_commands_and_error_details_outrank_repeated_outcome_lines() -> None:
    texts = [SpanText(f"Output:\n{_test_run(k)}\nWhat stands out?") for k in range(4)]
    query = f"Output:\n{_test_run(4)}\nWhat stands out?"  # the next paste, FAILED lines and all
    wanted = [f"- $ pytest tests/test_mod{k}.py -q" for k in range(4)]
    wanted += [f"- E AssertionError: expected {100 + k} == {200 + k}" for k in range(4)]
    budget = count("\n".join(wanted)) + 30  # the commands, the details and about one line more
    lines = digest(texts, query, budget, count).splitlines()
    assert set(wanted) <= set(lines), lines
    failed = [line for line in lines if "FAILED" in line]
    assert len(failed) <= 1
    assert count("\n".join(lines)) <= budget


def test_lines_of_one_form_keep_one_example_with_their_count_first() -> None:
    texts = [SpanText(_test_run(k)) for k in range(4)]
    wanted = [f"- E AssertionError: expected {100 + k} == {200 + k}" for k in range(4)]
    wanted += [f"- $ pytest tests/test_mod{k}.py -q" for k in range(4)]
    out = digest(texts, "", 400, count).splitlines()
    assert set(wanted) <= set(out)
    noted = [line for line in out if "lines like" in line]
    assert len(noted) == 1 and "FAILED" in noted[0], noted
    assert noted[0].startswith("- 40 lines like: tests/test_mod")
    everything = digest(texts, "", 5000, count).splitlines()  # room for all: all are kept
    assert len([line for line in everything if "FAILED" in line]) == 40
    assert everything == sorted(everything, key=lambda line: _position(texts, line))


def _position(texts: list[SpanText], line: str) -> int:
    whole = "\n".join(t.text for t in texts).replace("E   ", "E ")
    return whole.index(line[2:].removeprefix("40 lines like: "))


def test_distinct_error_details_are_distinct_facts() -> None:
    texts = [SpanText("E   AssertionError: expected 1 == 2"), SpanText(PROSE),
             SpanText("E   AssertionError: expected 3 == 4")]
    assert digest(texts, "", 500, count).splitlines() == [
        "- E AssertionError: expected 1 == 2",
        "- E AssertionError: expected 3 == 4",
    ]


def test_a_traceback_keeps_its_last_line_before_its_frames() -> None:
    frames = [f'  File "src/pkg/mod_{i}.py", line {10 + i}, in handler_{i}' for i in range(12)]
    trace = "\n".join(["Traceback (most recent call last):", *frames, "KeyError: 'port'"])
    one_line = count("- KeyError: 'port'") + 1
    assert digest([SpanText(trace)], "", one_line, count) == "- KeyError: 'port'"


def test_statements_of_one_form_are_never_folded() -> None:
    texts = [SpanText(f"The port of svc-{k} is {8080 + k}.") for k in range(6)]
    out = digest(texts, "", 500, count)
    assert out.splitlines() == [f"- The port of svc-{k} is {8080 + k}." for k in range(6)]


# -- mutation run 4 ---------------------------------------------------------------------------


def words(text: str) -> int:
    return len(text.split())


def test_theresources_line_names_the_latest_within_its_budget() -> None:
    touched = ["a.py", "b.py", "c.py", "d.py"]
    assert resources_line(touched, words, 5) == "Touched: a.py, b.py, c.py, d.py"
    assert resources_line(touched, words, 4) == "Touched: d.py (+3 more)"
    assert digest([], "", 20, words, touched) == "Touched: a.py, b.py, c.py, d.py"  # 20 // 4


def test_stop_words_are_not_query_words() -> None:
    assert _query_words("What would THEY change there in port.py") == {"change", "port"}


def test_the_digest_counts_its_header_and_goes_on_past_what_does_not_fit() -> None:
    port, host = SpanText("The port is 9090."), SpanText("The host is db-7.")
    # the header (2) and one bullet (6) fit in 13; two bullets (12) would only without it
    assert digest([port, host], "", 13, words, ["a.py"]) == "Touched: a.py\n- The host is db-7."
    long = SpanText("The very long host name is db-7 today.")  # ranked first, 10: too long
    assert digest([SpanText("Port 9090."), long], "", 5, words) == "- Port 9090."
    old = SpanText("Listen on port 8080.")
    fix = SpanText("Use port 9090 now; 8080 is out of date since the long migration of every one.")
    readme = SpanText("See the README file.")  # ranked after the superseded value
    assert digest([readme, old, fix], "", 8, words) == "- See the README file."


def test_a_query_word_many_sentences_share_weighs_less_than_a_rare_one() -> None:
    # each step of its own form (lines of one form would fold into one)
    span = [SpanText("Port 4 done.")] + [
        SpanText(f"Step {n} " + " ".join(["done"] * n) + ".") for n in range(1, 8)
    ]
    assert digest(span, "step port", 5, words) == "- Port 4 done."  # not the latest step


@pytest.mark.parametrize(
    ("sentence", "score"),
    [
        ("error: connection reset", 8.0),  # an error detail (`error:`), ranked up; no fact
        ("see src/a.py", 1.5),  # a path
        ("see src/a.py and src/b.py and src/c.py", 3.0),  # paths count up to 2
        ("ids abc-1 def-2 ghi-3 jkl-4 here", 3.5),  # identifiers up to 3, and a number
        ("it took 3 tries", 0.5),  # a number
        ("ask Alice", 0.5),  # a name
        ("The port is 9090", 3.5),  # a fact (with a number)
        ("The owner is Alice", 3.5),  # a fact (with a name)
        ("config is in src/app.yaml", 4.5),  # a fact (with a path)
        ("Actually use 8080 instead", 5.5),  # a correction of a fact
        ("The handler is parse_config", 4.0),  # a fact (with one identifier)
        ("$ make build", 6.0),  # a command, ranked above an error
    ],
)
def test_a_sentences_score_by_what_it_holds(sentence: str, score: float) -> None:
    candidate = _candidate(0, sentence, "", 0.0)
    assert candidate is not None and candidate.score == score


def test_a_sentence_of_nothing_is_no_candidate_and_a_query_counts_up_to_4() -> None:
    assert _candidate(0, "nothing here", "", 0.0) is None
    scores = [_candidate(0, "it took 3 tries", "", o).score for o in (0.5, 4.0, 5.0)]  # type: ignore[union-attr]
    assert scores == [1.5, 8.5, 8.5]


def test_query_words_weigh_by_their_rarity_in_the_span() -> None:
    # each sentence of its own form (lines of one form would fold into one)
    span = [SpanText(s) for s in ["port 1 a", "port 2 b b", "port 3 c c c", "gate 10"]]
    span += [SpanText(f"step {n}" + " x" * n) for n in range(4, 10)]
    ranked = _ranked(span, frozenset({"port", "step", "gate"}))
    by_sentence = {c.sentence: c.score for c in ranked}
    # gate: once, port: 3 times (RARE): weight 1 each; step: 6 times: weight 0.5
    assert (by_sentence["gate 10"], by_sentence["port 1 a"], by_sentence["step 4 x x x x"]) == (
        2.5,
        2.5,
        1.5,
    )


def test_a_superseded_value_ranks_half_a_point_below_its_correction() -> None:
    old = SpanText("The port is 8080 in src/app.yaml and src/b.yaml.")  # 6.5 on its own
    fix = SpanText("Actually 8080 is out of date.")  # 5.5
    assert [c.score for c in _ranked([old, fix], frozenset())] == [5.5, 5.0]


def test_a_sentence_of_exactly_the_longest_is_kept_whole() -> None:
    whole = "a" * (MAX_SENTENCE_CHARS - 1) + "."
    assert sentences(whole) == [whole]


def test_a_value_is_compared_whole_stripped_of_punctuation_only() -> None:
    old = SpanText("The display is X11.")
    fix = SpanText("Actually 11 is out of date.")
    assert [c.superseded_by for c in _ranked([old, fix], frozenset())] == [frozenset()] * 2


# -- mutation run 5 ---------------------------------------------------------------------------


def test_a_statement_naming_one_identifier_is_a_fact() -> None:
    fact, paths = SpanText("The handler is parse_config"), SpanText("see src/a.py and src/b.py")
    assert digest([fact, paths], "", 7, words) == "- The handler is parse_config"  # not both


def test_a_command_outranks_an_error_that_names_a_file() -> None:
    texts = [SpanText("$ make build"), SpanText("build failed in src/a.py")]
    assert digest(texts, "", 6, words) == "- $ make build"  # either fits, not both


def test_an_error_detail_repeated_in_another_case_is_kept_once() -> None:
    texts = [SpanText("fatal: not a git repository"), SpanText(PROSE),
             SpanText("Fatal: not a git repository")]
    assert digest(texts, "", 500, count) == "- Fatal: not a git repository"
