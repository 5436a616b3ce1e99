"""Content codings of HTTP bodies (RFC 9110 8.4): gzip, deflate, br and identity.

A compressed body is never inflated in one call: 1 MB of gzip can inflate to 1 GB, and one
`zlib.decompress` of it holds the event loop (and that memory) for seconds. `DecodedChunks`
decodes step by step, each step taking at most `INPUT_BYTES` in and giving at most `SLICE_BYTES`
out, and lets the event loop run between steps; its `limit` stops it once more than that many
bytes came out. `br` is supported only when the `brotli` module (Brotli >= 1.2, whose decoder can
bound its output) is importable; `SUPPORTED` says what is.

Nothing here knows HTTP servers or clients: the edge maps `CodingError`s to the client's error
(400, 413, 415), the upstream client to a 502.
"""

from __future__ import annotations

import asyncio
import importlib
import zlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

SLICE_BYTES = 256 * 1024
"""The most one step of decoding gives out (well under a millisecond of inflating)."""
INPUT_BYTES = 64 * 1024
"""The most one step takes in (input that yields nothing still costs its parsing)."""
MAX_CODINGS = 4
"""Codings applied on top of each other that a body may carry (`gzip, br`): more is refused."""
_ALIASES = {"x-gzip": "gzip"}  # RFC 9110 8.4.1.3: a recipient should take x-gzip as gzip
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS


class CodingError(Exception):
    """A body that cannot be decoded; the message names the problem, never the body."""


class UnsupportedCoding(CodingError):
    """A coding this proxy does not decode (or more than `MAX_CODINGS` of them)."""


class CorruptBody(CodingError):
    """Bytes that are not valid data of their coding, or end before its end."""


class DecodedTooLarge(CodingError):
    """More than the caller's limit came out of decoding."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} bytes once decoded")
        self.limit = limit


def _brotli_module() -> Any | None:
    """`brotli` when importable and able to bound its output (Brotli >= 1.2), else None."""
    try:
        module = importlib.import_module("brotli")
    except ImportError:
        return None
    decoder = getattr(module, "Decompressor", None)
    return module if decoder is not None and hasattr(decoder, "can_accept_more_data") else None


_BROTLI = _brotli_module()
SUPPORTED: tuple[str, ...] = ("gzip", "deflate") + (("br",) if _BROTLI is not None else ())
"""The codings this proxy decodes (identity aside), in the order it prefers them."""
ACCEPT_ENCODING = ", ".join(SUPPORTED)
"""What the proxy tells an upstream it accepts for answers it reads."""


def parse_content_encoding(
    header: str | None, supported: Sequence[str] = SUPPORTED
) -> tuple[str, ...]:
    """The codings a `Content-Encoding` header names, in the order they were applied, `identity`
    left out (an absent or empty header is no coding). Raises `UnsupportedCoding`."""
    codings = []
    for part in (header or "").split(","):
        name = part.strip().lower()
        name = _ALIASES.get(name, name)
        if name in ("", "identity"):
            continue
        if name not in supported:
            shown = part.strip()[:40]
            raise UnsupportedCoding(f"Content-Encoding {shown!r} is not supported")
        codings.append(name)
    if len(codings) > MAX_CODINGS:
        raise UnsupportedCoding(f"more than {MAX_CODINGS} content codings on one body")
    return tuple(codings)


class _Decoder(Protocol):
    def wants_input(self) -> bool:
        """Whether the decoder has given out all it can of the input it has."""

    def step(self, data: bytes, max_out: int) -> bytes:
        """Decode `data` (b"" unless `wants_input()`); at most about `max_out` bytes out."""

    def finish(self) -> None:
        """The input has ended: raises `CorruptBody` unless the coded data ended too."""


class _ZlibDecoder:
    """gzip (concatenated members too) and deflate (zlib-wrapped as RFC 9110 says, or raw as
    some servers send it, told apart by the first byte)."""

    def __init__(self, coding: str) -> None:
        self._gzip = coding == "gzip"
        self._inflate: Any = None
        self._tail = b""  # input given but not decoded yet
        self._full = False  # the last step filled its output: more may be pending

    def wants_input(self) -> bool:
        return not self._tail and not self._full

    def step(self, data: bytes, max_out: int) -> bytes:
        data = self._tail + data if self._tail else data
        self._tail = b""
        if not data and self._inflate is None:
            return b""
        if self._inflate is None or (self._inflate.eof and data):
            self._inflate = self._start_member(data)
        try:
            out: bytes = self._inflate.decompress(data, max_out)
        except zlib.error:
            raise CorruptBody(f"not valid {self._name} data") from None
        self._tail = self._inflate.unconsumed_tail or self._inflate.unused_data
        self._full = len(out) >= max_out
        return out

    def _start_member(self, data: bytes) -> Any:
        if self._inflate is not None and not self._gzip:
            raise CorruptBody("data after the end of the deflate stream")
        if self._gzip:
            return zlib.decompressobj(_GZIP_WBITS)
        zlib_wrapped = data[0] & 0x0F == 8  # the zlib header's compression method: deflate
        return zlib.decompressobj(_ZLIB_WBITS if zlib_wrapped else _RAW_DEFLATE_WBITS)

    def finish(self) -> None:
        if self._inflate is not None and not self._inflate.eof:
            raise CorruptBody(f"the {self._name} data ends before its end")

    @property
    def _name(self) -> str:
        return "gzip" if self._gzip else "deflate"


class _BrotliDecoder:
    def __init__(self) -> None:
        assert _BROTLI is not None
        self._error: type[Exception] = _BROTLI.error
        self._decoder = _BROTLI.Decompressor()
        self._started = False
        self._full = False

    def wants_input(self) -> bool:
        return not self._full and bool(self._decoder.can_accept_more_data())

    def step(self, data: bytes, max_out: int) -> bytes:
        self._started = self._started or bool(data)
        try:
            out: bytes = self._decoder.process(data, max_out)
        except self._error:
            raise CorruptBody("not valid br data") from None
        self._full = len(out) >= max_out
        return out

    def finish(self) -> None:
        if self._started and not self._decoder.is_finished():
            raise CorruptBody("the br data ends before its end")


def _decoder(coding: str) -> _Decoder:
    if coding == "br":
        if _BROTLI is None:
            raise UnsupportedCoding("Content-Encoding 'br' is not supported")
        return _BrotliDecoder()
    if coding in ("gzip", "deflate"):
        return _ZlibDecoder(coding)
    raise UnsupportedCoding(f"Content-Encoding {coding[:40]!r} is not supported")


class DecodedChunks:
    """`encoded` decoded from `coding`, in pieces of at most about `SLICE_BYTES`.

    Each step of decoding is followed by a pass of the event loop, so other requests go on
    while a large body is decoded. Raises `CorruptBody`, and `DecodedTooLarge` once more than
    `limit` bytes came out (None: no limit). An iterator, not a generator: nothing is left to
    finalise when its reader stops early.
    """

    def __init__(
        self, encoded: AsyncIterator[bytes], coding: str, limit: int | None = None
    ) -> None:
        self._encoded = encoded
        self._decoder = _decoder(coding)
        self._limit = limit
        self._given = 0
        self._input = memoryview(b"")
        self._ended = False

    def __aiter__(self) -> DecodedChunks:
        return self

    async def __anext__(self) -> bytes:
        while True:
            data = b""
            if self._decoder.wants_input():
                if not self._input:
                    await self._next_input()
                    continue
                data = bytes(self._input[:INPUT_BYTES])
                self._input = self._input[INPUT_BYTES:]
            out = self._decoder.step(data, SLICE_BYTES)
            await asyncio.sleep(0)  # the event loop's turn between two steps
            if out:
                self._given += len(out)
                if self._limit is not None and self._given > self._limit:
                    raise DecodedTooLarge(self._limit)
                return out

    async def _next_input(self) -> None:
        """The next encoded chunk; at the end, the decoder's check, then StopAsyncIteration."""
        if not self._ended:
            try:
                self._input = memoryview(await self._encoded.__anext__())
                return
            except StopAsyncIteration:
                self._ended = True
                self._decoder.finish()
        raise StopAsyncIteration


def decoded(
    encoded: AsyncIterator[bytes], codings: Sequence[str], limit: int | None = None
) -> AsyncIterator[bytes]:
    """`encoded` with `codings` (as `parse_content_encoding` gives them) undone, the last
    applied first; `limit` bounds what comes out of every one of them."""
    chunks = encoded
    for coding in reversed(codings):
        chunks = DecodedChunks(chunks, coding, limit)
    return chunks


class _Once:
    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def __aiter__(self) -> _Once:
        return self

    async def __anext__(self) -> bytes:
        data, self._data = self._data, None
        if data is None:
            raise StopAsyncIteration
        return data


async def decode_body(body: bytes, codings: Sequence[str], limit: int) -> bytes:
    """A whole body with its `codings` undone, at most `limit` bytes (else `DecodedTooLarge`),
    decoded in steps with the event loop running between them."""
    if not codings or not body:
        return body
    return b"".join([chunk async for chunk in decoded(_Once(body), codings, limit)])
