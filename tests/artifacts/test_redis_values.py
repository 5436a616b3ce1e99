"""`proxy.artifacts.redis_values`: a long content is encoded, compressed and read back a slice at
a time, into the very bytes and text of the one-shot way."""

from __future__ import annotations

import random
import zlib

import orjson
import pytest

from proxy.artifacts.redis_values import decode_value, encode_value
from proxy.artifacts.store import NewArtifact
from proxy.jsonio.slices import LONG_CHARS


def _one_shot(item: NewArtifact, created_at: float, compress_over: int) -> bytes:
    """The encoding as it was written before slices: the reference."""
    header = orjson.dumps({"k": item.kind, "m": item.meta, "c": created_at})
    body = header + b"\n" + item.content.encode("utf-8", "surrogatepass")
    if len(body) > compress_over:
        packed = zlib.compress(body, 1)
        if len(packed) < len(body):
            return b"\x01" + packed
    return b"\x00" + body


def _long_text(seed: int) -> str:
    rng = random.Random(seed)  # multi-byte characters and a lone surrogate across slice edges
    return "".join(rng.choice("ab\n é中😀\ud800") for _ in range(2 * LONG_CHARS + 777))


@pytest.mark.parametrize("compress_over", [4096, 1 << 40])
def test_a_long_content_is_written_and_read_as_the_one_shot_way_does(compress_over: int) -> None:
    item = NewArtifact(_long_text(1), "tool_result", {"name": "read_file", "n": 1})
    encoded = encode_value(item, 12.5, compress_over)
    assert encoded == _one_shot(item, 12.5, compress_over)
    assert encoded[:1] == (b"\x01" if compress_over == 4096 else b"\x00")
    artifact = decode_value("art_1", encoded)
    assert (artifact.content, artifact.kind, artifact.meta) == (item.content, item.kind, item.meta)
    assert artifact.created_at == 12.5


def test_a_long_content_of_wide_characters_too() -> None:
    rng = random.Random(2)
    text = "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(LONG_CHARS + 5))
    item = NewArtifact(text, "k", {})
    encoded = encode_value(item, 1.0, compress_over=10)
    assert encoded == _one_shot(item, 1.0, compress_over=10)
    assert decode_value("art_1", encoded).content == text


def test_a_long_content_cut_short_is_a_corrupt_value() -> None:
    encoded = encode_value(NewArtifact("é" * LONG_CHARS, "k", {}), 1.0, compress_over=1 << 40)
    with pytest.raises(ValueError):
        decode_value("art_1", encoded[:-1])  # half of the last character
