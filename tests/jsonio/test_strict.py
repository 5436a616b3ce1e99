"""`proxy.jsonio`: strict, lossless parsing and serialising that never fails on parsed input."""

from __future__ import annotations

import json

import orjson
import pytest

from proxy.errors import ErrorCode, ProxyError
from proxy.jsonio import MAX_DEPTH, dumps, loads, loads_object


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"[18446744073709551616]", [2**64]),  # orjson alone would make it a float
        (b"[-9223372036854775809]", [-(2**63) - 1]),
        (b'{"seed": 123456789012345678901234567890}', {"seed": 123456789012345678901234567890}),
        (b"[18446744073709551615, -9223372036854775808, 1e-400]", [2**64 - 1, -(2**63), 0.0]),
    ],
)
def test_integers_beyond_64_bits_stay_exact(raw: bytes, expected: object) -> None:
    value = loads(raw)
    assert value == expected and repr(value) == repr(expected)
    assert dumps(value) == json.dumps(expected, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    "raw",
    [
        b"[1e400]", b"[-1e400]", b'{"t": NaN}', b"[Infinity]", b"[-Infinity]",
        '{"a": 1}'.encode("utf-16"), '{"a": 1}'.encode("utf-32"), b"\xef\xbb\xbf{}",
        b'["\xff"]', b'["\xed\xa0\x80"]', b'["a\x00b"]', b"[" + b"1" * 5000 + b"]",
        b"[" * 1025 + b"]" * 1025, b'["\\ud800"' + b", [" * 1200 + b"]" * 1201,
    ],
)  # fmt: skip
def test_what_is_not_strict_json_is_invalid_json(raw: bytes) -> None:
    with pytest.raises(ProxyError) as caught:
        loads(raw)
    assert caught.value.code is ErrorCode.invalid_json


def test_lone_surrogates_parse_and_are_written_back_as_escapes() -> None:
    raw = b'{"a":"\\ud800 caf\xc3\xa9","b":"\\udfff\\ud83d\\ude00"}'
    value = loads(raw)
    assert value == {"a": "\ud800 café", "b": "\udfff\U0001f600"}
    out = dumps(value)
    assert out.isascii() and loads(out) == value


def test_nesting_beyond_the_stdlib_recursion_limit_is_written_iteratively() -> None:
    depth = 1015  # parses (orjson allows 1024) but json.dumps would hit RecursionError
    raw = b'{"a":' + b"[" * depth + b'{"k":[1,"\xc3\xa9",{},[]]}' + b"]" * depth + b',"n":null}'
    value = orjson.loads(raw)  # deeper than `loads` takes: values the proxy builds may be deep
    value["big"] = 2**70  # forces the stdlib path
    assert dumps(value) == raw[:-1] + b',"big":1180591620717411303424}'


def test_a_body_must_be_an_object() -> None:
    with pytest.raises(ProxyError) as caught:
        loads_object(b"[1]")
    assert caught.value.code is ErrorCode.invalid_request
    assert loads_object(b'{"a": [1]}') == {"a": [1]}


@pytest.mark.parametrize("opening", [b"[", b'{"k":'])
def test_nesting_up_to_the_stated_depth_parses_and_deeper_is_invalid_json(opening: bytes) -> None:
    closing = b"]" if opening == b"[" else b"}"

    def nested(depth: int) -> bytes:
        return opening * depth + b"1" + closing * depth

    assert loads(nested(MAX_DEPTH)) is not None
    for depth in (MAX_DEPTH + 1, 1_000, 100_000):  # orjson's own limit, the stdlib's, neither
        with pytest.raises(ProxyError) as caught:
            loads(nested(depth))
        assert caught.value.code is ErrorCode.invalid_json
        assert "nested too deeply" in str(caught.value)


def test_the_depth_is_checked_past_a_huge_integer_too() -> None:
    """A huge integer sends the body through the stdlib parser: its depth still counts."""
    huge = str(2**70).encode()
    assert loads(b"[" + huge + b"]") == [2**70]
    deep = b"[" * MAX_DEPTH + b"1" + b"]" * MAX_DEPTH  # accepted on its own
    assert loads(deep) is not None
    with pytest.raises(ProxyError) as caught:
        loads(b"[" + huge + b"," + deep + b"]")  # one level more, after a huge integer
    assert "nested too deeply" in str(caught.value)
