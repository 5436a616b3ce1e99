"""estimate_tokens edge cases (its calibration against real tokenizers is in test_tokens.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from proxy.tokens.estimate import BYTE_CLASSES, estimate_tokens


def test_byte_class_table() -> None:
    assert len(BYTE_CLASSES) == 256

    def cls(byte: int) -> str:
        return chr(BYTE_CLASSES[byte])

    assert {cls(b) for b in b"azAZ"} == {"L"}
    assert {cls(b) for b in b"09"} == {"D"}
    assert {cls(b) for b in b"!~{}\"'"} == {"P"}
    assert cls(ord(" ")) == "S"
    assert {cls(b) for b in b"\t\n\v\f\r"} == {"N"}
    assert {cls(b) for b in (0x00, 0x1F, 0x7F)} == {"o"}
    assert {cls(b) for b in (0x80, 0xBF)} == {"x"}  # continuation bytes
    assert {cls(b) for b in (0xC0, 0xDF)} == {"2"}
    assert {cls(b) for b in (0xE0, 0xEF)} == {"3"}
    assert {cls(b) for b in (0xF0, 0xFF)} == {"4"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 2),  # ceil(1.3 + 0.53 + 0.015)
        ("hello", 3),  # 5 letters, 2 letter pairs: ceil(1.3 + 0.53 * 3 + 0.075)
        ("hello world", 5),
        ("a" * 10, 5),
        ("1234", 6),  # ceil(1.3 + 0.5 * 2 + 0.7 * 4)
        ("\x00", 2),  # a control byte: the constant only
        ("é", 3),  # a 2-byte character: ceil(1.3 + 1.42)
        ("😀", 5),  # a 4-byte character: ceil(1.3 + 3)
    ],
)
def test_known_values(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_lone_surrogates_are_counted_not_raised() -> None:
    assert estimate_tokens("\ud800") == 3  # encoded as 3 bytes (surrogatepass)
    assert estimate_tokens("a\udfffb") > estimate_tokens("ab")


@settings(max_examples=examples(200), deadline=None)
@given(st.text(), st.text())
def test_appending_never_lowers_the_estimate(head: str, tail: str) -> None:
    assert estimate_tokens(head + tail) >= estimate_tokens(head) >= 0
