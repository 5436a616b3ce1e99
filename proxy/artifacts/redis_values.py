"""How `RedisStore` lays out one artifact in a Redis value.

One encoding byte (`0x00` raw, `0x01` zlib) then the (possibly compressed) body
`<header JSON>\\n<content UTF-8>`; the header is `{"k": kind, "m": meta, "c": created_at}`.
"""

from __future__ import annotations

import zlib

import orjson

from proxy.artifacts.store import Artifact, NewArtifact

_RAW = b"\x00"
_ZLIB = b"\x01"


def encode_value(item: NewArtifact, created_at: float, compress_over: int) -> bytes:
    """Serialise one artifact; raises TypeError when `kind`/`meta` are not JSON-serialisable."""
    header = orjson.dumps({"k": item.kind, "m": item.meta, "c": created_at})
    body = header + b"\n" + item.content.encode("utf-8", "surrogatepass")
    if len(body) > compress_over:
        packed = zlib.compress(body, 1)
        if len(packed) < len(body):
            return _ZLIB + packed
    return _RAW + body


def decode_value(artifact_id: str, raw: bytes) -> Artifact:
    """Inverse of `encode_value`; raises ValueError (or zlib.error) on a corrupt value."""
    encoding, payload = raw[:1], raw[1:]
    if encoding == _ZLIB:
        payload = zlib.decompress(payload)
    elif encoding != _RAW:
        raise ValueError(f"unknown artifact encoding byte {encoding!r}")
    header_json, sep, content = payload.partition(b"\n")
    if not sep:
        raise ValueError("artifact value has no header separator")
    header = orjson.loads(header_json)
    if not isinstance(header, dict) or not isinstance(header.get("m"), dict):
        raise ValueError("artifact header is malformed")
    return Artifact(
        id=artifact_id,
        content=content.decode("utf-8", "surrogatepass"),
        kind=str(header.get("k", "")),
        meta=header["m"],
        created_at=float(header.get("c", 0.0)),
    )
