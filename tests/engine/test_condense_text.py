"""engine/condense_text: exact, reversible transforms of machine-made text."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.engine.condense_text import Condensed, CondenseMemo, condense, expand, minify

ROWS = [{"id": i, "name": f"user{i}", "ok": i % 2 == 0, "meta": {"n": [i, None]}} for i in range(6)]


def test_pretty_json_is_minified_and_expands_to_the_same_value() -> None:
    text = json.dumps({"a": [1, 2.5, None, "x"], "b": {"c": True}}, indent=2)
    out = condense(text, ["json"])
    assert out == Condensed("json", '{"a":[1,2.5,null,"x"],"b":{"c":true}}')
    assert json.loads(expand(out)) == json.loads(text)


def test_array_of_objects_becomes_a_header_and_rows() -> None:
    text = json.dumps(ROWS, indent=2)
    out = condense(text)
    assert out is not None and out.kind == "table"
    lines = out.body.split("\n")
    assert lines[0] == "id|name|ok|meta"
    assert lines[1] == '0|"user0"|true|{"n":[0,null]}'
    assert expand(out) == minify(ROWS)


def test_table_cells_keep_separators_newlines_nulls_and_missing_keys() -> None:
    rows: list[dict[str, Any]] = [
        {"a|b": "x|y\nz", "k": None},
        {"k": "only k"},
        {"a|b": "", "k": [{"|": "|"}]},
    ]
    out = condense(json.dumps(rows, indent=4), ["table"])
    assert out is not None and out.kind == "table"
    assert out.body.split("\n")[2] == '|"only k"'  # an empty cell: the key is absent
    assert expand(out) == minify(rows)


def test_objects_with_keys_out_of_header_order_are_not_tabled() -> None:
    rows = [{"a": 1, "b": 2}, {"b": 3, "a": 4}]
    assert condense(json.dumps(rows, indent=2), ["table"]) is None


def test_lossy_json_is_refused() -> None:
    for text in ('{"a": 1, "a": 2}', '{"a": 1E5}', '{"a": 1.50}', '{"a": NaN}', '{"a": -0}'):
        assert condense(text + " " * 40, ["json", "table"]) is None


def test_runs_of_lines_differing_in_numbers_collapse_with_count_and_range() -> None:
    log = "\n".join(
        [
            "start",
            *(f"12:00:{s:02d} step {i} of 40 {{ok}}" for i, s in enumerate(range(3, 43))),
            "end",
        ]
    )
    out = condense(log)
    assert out is not None and out.kind == "lines"
    assert out.body.split("\n")[1].startswith("[x40] 12:00:{03,04,05,")
    assert "step {0..39} of 40 {{ok}}" in out.body
    assert expand(out) == log


def test_identical_lines_and_steps_other_than_one() -> None:
    log = "\n".join(["same line"] * 5 + [f"id {n}" for n in range(100, 0, -7)])
    out = condense(log, ["lines"])
    assert out is not None
    assert out.body.split("\n") == ["[x5] same line", "[x15] id {100..2/-7}"]
    assert expand(out) == log


def test_text_already_using_the_run_mark_is_not_collapsed() -> None:
    assert condense("\n".join(["[x3] a"] + ["b 1"] * 9), ["lines"]) is None


def test_never_larger_and_none_when_nothing_gains() -> None:
    assert condense('{"a":1}') is None  # already minified
    assert condense("a\nb\nc") is None


_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
_leaf = _leaf | st.floats(allow_nan=False, allow_infinity=False)
_json = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_keys = st.lists(st.text(max_size=5), min_size=1, max_size=5, unique=True)


@st.composite
def _tables(draw: st.DrawFn) -> list[dict[str, Any]]:
    keys = draw(_keys)
    rows = []
    for _ in range(draw(st.integers(2, 8))):
        present = [k for k in keys if draw(st.booleans())] or keys[:1]
        rows.append({k: draw(_json) for k in present})
    return rows


def _check(text: str, value: Any) -> None:
    out = condense(text)
    assert out == condense(text)  # deterministic
    if out is not None:
        assert len(out.body) < len(text)
        assert expand(out) == minify(value)
        assert json.loads(expand(out)) == value


@settings(max_examples=300, deadline=None)
@given(_json, st.sampled_from([None, 1, 2]))
def test_generated_json_comes_back_exactly(value: Any, indent: int | None) -> None:
    _check(json.dumps(value, indent=indent), value)


@settings(max_examples=300, deadline=None)
@given(_tables(), st.sampled_from([None, 2]))
def test_generated_arrays_of_objects_come_back_exactly(rows: list[Any], indent: int | None) -> None:
    _check(json.dumps(rows, indent=indent, ensure_ascii=False), rows)


_words = st.sampled_from(["INFO", "ok", "step", "{x}", "}", "[x", "a|b", "\r", "0", "07", "-", ""])
_line = st.lists(_words | st.integers(0, 999).map(str), max_size=6).map(" ".join)


@st.composite
def _logs(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        shape = draw(_line)
        count = draw(st.integers(1, 6))
        numbers = draw(st.lists(st.integers(0, 99), min_size=count, max_size=count))
        step = draw(st.integers(-3, 3))
        lines += [f"{shape} {n} t{k * step + 50}" for k, n in enumerate(numbers)]
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=300, deadline=None)
@given(_logs())
def test_generated_logs_come_back_exactly(log: str) -> None:
    out = condense(log, ["lines"])
    assert out == condense(log, ["lines"])
    if out is not None:
        assert len(out.body) < len(log)
        assert expand(out) == log


def test_the_memo_answers_as_condense_and_stays_within_its_bound() -> None:
    texts = [json.dumps(ROWS, indent=n) for n in (1, 2, 3)] + ["a\nb", "x 1\nx 2\nx 3"]
    memo = CondenseMemo(max_chars=600)
    for text in texts * 2:
        assert memo(text) == condense(text)
        assert memo(text, ["lines"]) == condense(text, ["lines"])
    assert memo._chars <= 600 and 0 < len(memo._items) < 2 * len(texts)
