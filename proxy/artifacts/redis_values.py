"""How `RedisStore` lays out one artifact in a Redis value.

One encoding byte (`0x00` raw, `0x01` zlib) then the (possibly compressed) body
`<header JSON>\\n<content UTF-8>`; the header is `{"k": kind, "m": meta, "c": created_at}`. A
content of `LONG_CHARS` or more is encoded and compressed, and read back, a slice at a time (zlib
writes the same stream either way), so that no step holds the GIL for the whole text.
"""

from __future__ import annotations

import codecs
import zlib

import orjson

from proxy.artifacts.store import Artifact, NewArtifact
from proxy.jsonio.slices import LONG_CHARS, grown, utf8_slices

_RAW = b"\x00"
_ZLIB = b"\x01"


def encode_value(item: NewArtifact, created_at: float, compress_over: int) -> bytes:
    """Serialise one artifact; raises TypeError when `kind`/`meta` are not JSON-serialisable."""
    header = orjson.dumps({"k": item.kind, "m": item.meta, "c": created_at})
    content = item.content
    if len(content) >= LONG_CHARS:  # a slice at a time: each step holds the GIL briefly
        return _encoded_long([header, b"\n", *utf8_slices(content)], compress_over)
    body = header + b"\n" + content.encode("utf-8", "surrogatepass")
    if len(body) > compress_over:
        packed = zlib.compress(body, 1)
        if len(packed) < len(body):
            return _ZLIB + packed
    return _RAW + body


def _encoded_long(pieces: list[bytes], compress_over: int) -> bytes:
    """`encode_value`'s bytes for a long content, encoded and compressed piece by piece (zlib
    writes the same stream either way) and joined by `bytes.join`, which copies without the
    GIL."""
    size = sum(map(len, pieces))
    if size > compress_over:
        packer = zlib.compressobj(1)
        packed = [packer.compress(piece) for piece in pieces]
        packed.append(packer.flush())
        if sum(map(len, packed)) < size:
            return b"".join([_ZLIB, *packed])
    return b"".join([_RAW, *pieces])


def decode_value(artifact_id: str, raw: bytes) -> Artifact:
    """Inverse of `encode_value`; raises ValueError (or zlib.error) on a corrupt value."""
    encoding = raw[:1]
    if encoding == _ZLIB:
        payload, start = zlib.decompress(memoryview(raw)[1:]), 0
    elif encoding == _RAW:
        payload, start = raw, 1  # no copy of the value without its encoding byte
    else:
        raise ValueError(f"unknown artifact encoding byte {encoding!r}")
    newline = payload.find(b"\n", start)
    if newline < 0:
        raise ValueError("artifact value has no header separator")
    header = orjson.loads(payload[start:newline])
    if not isinstance(header, dict) or not isinstance(header.get("m"), dict):
        raise ValueError("artifact header is malformed")
    return Artifact(
        id=artifact_id,
        content=_decoded(payload, newline + 1),
        kind=str(header.get("k", "")),
        meta=header["m"],
        created_at=float(header.get("c", 0.0)),
    )


def _decoded(payload: bytes, start: int) -> str:
    """`payload[start:]` as text; a long one decoded a slice at a time and `grown`."""
    if len(payload) - start < LONG_CHARS:
        return payload[start:].decode("utf-8", "surrogatepass")
    decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    view = memoryview(payload)
    ends = range(start + LONG_CHARS, len(payload) + LONG_CHARS, LONG_CHARS)
    return grown(
        decoder.decode(view[end - LONG_CHARS : end], final=end >= len(payload)) for end in ends
    )
