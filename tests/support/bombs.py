"""Compressed bodies for tests and benches: `encode(data, coding)`, and `bomb(coding, size)`, a
small body that inflates to `size` zero bytes (built a MiB at a time, never held inflated).

Codings: `gzip`, `deflate` (zlib-wrapped, as RFC 9110 says), `deflate-raw` (what some servers
send as `deflate`), `br`.
"""

from __future__ import annotations

import functools
import zlib

import brotli

MIB = 1 << 20
_ZEROS = bytes(MIB)
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "deflate-raw": -zlib.MAX_WBITS}
BR_QUALITY = 5
"""Fast, and a MiB of zeros still takes a few bytes."""


def encode(data: bytes, coding: str) -> bytes:
    if coding == "br":
        return bytes(brotli.compress(data, quality=BR_QUALITY))
    packer = zlib.compressobj(6, zlib.DEFLATED, _WBITS[coding])
    return packer.compress(data) + packer.flush()


@functools.cache
def bomb(coding: str, size: int) -> bytes:
    """`size` zero bytes (a whole number of MiB plus the rest) in `coding`."""
    whole, rest = divmod(size, MIB)
    if coding == "br":
        packer = brotli.Compressor(quality=BR_QUALITY)
        parts = [packer.process(_ZEROS) for _ in range(whole)]
        parts += [packer.process(_ZEROS[:rest]), packer.finish()]
        return b"".join(parts)
    deflater = zlib.compressobj(6, zlib.DEFLATED, _WBITS[coding])
    parts = [deflater.compress(_ZEROS) for _ in range(whole)]
    parts += [deflater.compress(_ZEROS[:rest]), deflater.flush()]
    return b"".join(parts)
