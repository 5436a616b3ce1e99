"""`proxy.jsonio.slices`: a large body parsed, and long strings written, in slices give exactly
what `strict` gives (value, bytes, error), with no orjson call given much more than a slice."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from proxy.errors import ProxyError
from proxy.jsonio import dumps, dumps_sorted, long_strings, slices, strict
from proxy.jsonio.slices import dumps_sliced, loads_sliced

TINY = {"SLICE_BYTES": 32, "LONG_CHARS": 32, "_WINDOW": 40, "_NARROW": 12}
"""Slices small enough that generated values of a few hundred bytes are cut everywhere."""


@contextmanager
def sliced_small() -> Iterator[list[bytes]]:
    """`TINY` slices, and the bodies that went to `strict.loads` meanwhile."""
    seen: list[bytes] = []
    parse = strict.loads

    def spy(raw: bytes | str) -> Any:
        seen.append(raw if isinstance(raw, bytes) else raw.encode())
        return parse(raw)

    with pytest.MonkeyPatch.context() as patch:
        for name, value in TINY.items():
            patch.setattr(slices, name, value)
        patch.setattr(strict, "loads", spy)
        yield seen


@pytest.fixture
def tiny() -> Iterator[list[bytes]]:
    with sliced_small() as seen:
        yield seen


def same(a: Any, b: Any) -> bool:
    """Equal, key order and float signs included."""
    return bool(orjson.dumps(a) == orjson.dumps(b))


TEXT = st.text(
    st.characters(codec="utf-8") | st.sampled_from('"\\/\n\t{}[],: é中😀'), max_size=120
)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(TEXT, inner, max_size=6),
    max_leaves=40,
)
WRITERS: list[Callable[[Any], bytes]] = [
    orjson.dumps,
    lambda v: json.dumps(v).encode(),  # ensure_ascii: every non-ASCII character escaped
    lambda v: json.dumps(v, ensure_ascii=False, indent=2).encode(),
    lambda v: json.dumps(v, ensure_ascii=False, separators=(" , ", " : ")).encode(),
]


@settings(max_examples=examples(300))
@given(value=VALUES, writer=st.sampled_from(WRITERS))
def test_any_body_parses_to_the_value_strict_gives_without_falling_back(
    value: Any, writer: Callable[[Any], bytes]
) -> None:
    raw = writer(value)
    with sliced_small() as whole_parses:
        parsed = loads_sliced(raw)
    small, huge = len(raw) <= TINY["SLICE_BYTES"], strict.scanned(value)  # floats from 9.2e18
    assert whole_parses == ([raw] if small or huge else [])  # may be integers: the stdlib's
    assert same(parsed, strict.loads(raw))
    assert same(parsed, value)


@settings(max_examples=examples(300))
@given(value=VALUES, data=st.data())
def test_a_damaged_body_fails_as_strict_fails(value: Any, data: st.DataObject) -> None:
    raw = bytearray(json.dumps(value, ensure_ascii=False).encode())
    at = data.draw(st.integers(0, len(raw)))
    if data.draw(st.booleans()) and at < len(raw):
        del raw[at]
    else:
        inserted = [b'"', b"\\", b",", b"]", b"}", b"{", b"\xff", b"x"]
        raw[at:at] = data.draw(st.sampled_from(inserted))
    with sliced_small():
        sliced = outcome(loads_sliced, bytes(raw))
    assert sliced == outcome(strict.loads, bytes(raw))


def outcome(parse: Callable[[bytes], Any], raw: bytes) -> tuple[str, bytes]:
    try:
        return "value", strict.dumps(parse(raw))
    except ProxyError as exc:
        return "error", f"{exc.code} {exc}".encode()


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "b": ["' + b"x" * 100 + b'"], "a": 2}',  # a duplicate key: the last value wins
        b"[" + b"1," * 40 + b"1]",
        b'{"k": "' + "é中😀\\n\\u00e9\\ud83d\\ude00\\\\".encode() * 20 + b'"}',
        b'  [ {"a" : [ ] } ,\n {"b":{}} , "' + b"y" * 80 + b'" ]  ',
        b'{"' + b"k" * 100 + b'": [true, false, null, -0.0, 1e-300]}',
        b"[" * 60 + b"1" + b"]" * 60,
    ],
)
def test_shapes_the_slicer_splits_parse_like_strict(tiny: list[bytes], raw: bytes) -> None:
    parsed = loads_sliced(raw)
    assert tiny == []
    assert same(parsed, strict.loads(raw))


@pytest.mark.parametrize(
    "raw",
    [
        b"[" + b"1," * 40 + b"]",  # a trailing comma
        b"[" + b"1,," * 20 + b"1]",
        b'{"a": 1' + b" " * 60 + b"}{}",  # two values
        b"[" + b'"x",' * 20 + b'"\\ud800"]',  # a lone surrogate: the stdlib's
        b"[" + b"1," * 40 + b"184467440737095516160]",  # beyond 64 bits: the stdlib's
        b"[" * 200 + b"]" * 200,  # deeper than MAX_DEPTH
        b"\xef\xbb\xbf[" + b"1," * 40 + b"1]",
    ],
)
def test_what_the_slicer_does_not_take_is_strict_s_answer(tiny: list[bytes], raw: bytes) -> None:
    assert outcome(loads_sliced, raw) == outcome(strict.loads, raw)
    assert tiny[0] == raw


def _large_body(rng: random.Random) -> dict[str, Any]:
    alphabet = 'abc é中😀\n\t"\\/{}[],:'
    text = "".join(rng.choice(alphabet) for _ in range(1_500_000))
    small = [{"role": "user", "content": f"m{i}", "x": [i, {"y": "}]"}]} for i in range(20_000)]
    return {"model": "m", "messages": [*small, {"role": "tool", "content": text}], "n": 1}


@pytest.mark.parametrize("ascii_only", [False, True])
def test_no_orjson_call_is_given_much_more_than_a_slice(
    monkeypatch: pytest.MonkeyPatch, ascii_only: bool
) -> None:
    body = _large_body(random.Random(7))
    raw = json.dumps(body, ensure_ascii=ascii_only).encode()
    sizes: list[int] = []
    parse = orjson.loads

    def spy(data: bytes) -> Any:
        sizes.append(len(data))
        return parse(data)

    monkeypatch.setattr(strict, "loads", None)  # no falling back
    monkeypatch.setattr(orjson, "loads", spy)
    value = loads_sliced(raw)
    monkeypatch.setattr(orjson, "loads", parse)
    assert same(value, body)
    assert len(sizes) > 20
    assert max(sizes) <= 2 * slices.SLICE_BYTES + 2


@settings(max_examples=examples(200))
@given(value=VALUES, sort=st.booleans())
def test_writing_in_slices_writes_the_same_bytes(value: Any, sort: bool) -> None:
    option = orjson.OPT_SORT_KEYS if sort else None
    with sliced_small():
        written = dumps_sliced(value, option)
    assert written == orjson.dumps(value, option=option)


def test_long_strings_are_written_in_slices_only_where_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[Any] = []
    real = slices.dumps_sliced
    monkeypatch.setattr(slices, "dumps_sliced", lambda *a: calls.append(a) or real(*a))
    value = {"b": "x" * (slices.LONG_CHARS + 5), "a": ["é" * slices.LONG_CHARS, 1]}
    plain, sorted_plain = dumps(value), dumps_sorted(value)
    assert calls == []
    with long_strings():
        assert dumps(value) == plain == orjson.dumps(value)
        assert dumps_sorted(value) == sorted_plain
    assert len(calls) == 2
    assert dumps(value) == plain and len(calls) == 2  # the context is over


def test_what_orjson_cannot_write_takes_strict_s_way_in_slices_too() -> None:
    value = {"lone": "\ud800" + "x" * slices.LONG_CHARS, "huge": 2**70}
    with long_strings():
        assert dumps(value) == strict.dumps(value)
        with pytest.raises(TypeError):
            dumps_sorted(value)


@settings(max_examples=examples(100))
@given(pieces=st.lists(st.sampled_from(["", "ab", "é" * 3, "中", "😀x", "a" * 50]), max_size=12))
def test_a_grown_text_is_the_joined_text(pieces: list[str]) -> None:
    assert slices.grown(pieces) == "".join(pieces)
    assert slices.grown(iter(pieces)) == "".join(pieces)
