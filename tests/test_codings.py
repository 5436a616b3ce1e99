"""`proxy.codings`: content codings undone step by step, bounded, with the event loop free."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator, Sequence

import pytest
from bombs import MIB, bomb, encode

from proxy.codings import (
    ACCEPT_ENCODING,
    INPUT_BYTES,
    MAX_CODINGS,
    SLICE_BYTES,
    SUPPORTED,
    CorruptBody,
    DecodedChunks,
    DecodedTooLarge,
    UnsupportedCoding,
    decode_body,
    decoded,
    parse_content_encoding,
)

CODINGS = ["gzip", "deflate", "deflate-raw", "br"]
TEXT = b"".join(
    b'{"line": %d, "text": "%s"}\n' % (i, os.urandom(20).hex().encode())
    for i in range(30_000)
)


class Chunks:
    """An async iterator over fixed chunks (a body as a transport delivers it)."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = list(chunks)

    def __aiter__(self) -> Chunks:
        return self

    async def __anext__(self) -> bytes:
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.pop(0)


def split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def header_name(coding: str) -> str:
    return "deflate" if coding == "deflate-raw" else coding


async def collect(chunks: AsyncIterator[bytes]) -> list[bytes]:
    return [chunk async for chunk in chunks]


# -- parsing the header ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "codings"),
    [
        (None, ()),
        ("", ()),
        ("identity", ()),
        (" GZip ", ("gzip",)),
        ("x-gzip", ("gzip",)),
        ("deflate, identity, br", ("deflate", "br")),
        ("gzip,gzip", ("gzip", "gzip")),
    ],
)
def test_the_header_names_codings_in_the_order_applied(
    header: str | None, codings: tuple[str, ...]
) -> None:
    assert parse_content_encoding(header) == codings


@pytest.mark.parametrize("header", ["zstd", "gzip, compress", "bzip2", "gzip;q=1"])
def test_a_coding_the_proxy_does_not_decode_is_unsupported(header: str) -> None:
    with pytest.raises(UnsupportedCoding, match="is not supported"):
        parse_content_encoding(header)


def test_br_is_unsupported_without_a_brotli_module() -> None:
    with pytest.raises(UnsupportedCoding, match="'br' is not supported"):
        parse_content_encoding("br", supported=("gzip", "deflate"))


def test_more_codings_than_the_cap_are_refused() -> None:
    assert len(parse_content_encoding(", ".join(["gzip"] * MAX_CODINGS))) == MAX_CODINGS
    with pytest.raises(UnsupportedCoding, match=f"more than {MAX_CODINGS}"):
        parse_content_encoding(", ".join(["gzip"] * (MAX_CODINGS + 1)))


def test_br_is_supported_here_and_advertised() -> None:
    assert SUPPORTED == ("gzip", "deflate", "br")  # Brotli is a dependency
    assert ACCEPT_ENCODING == "gzip, deflate, br"


# -- decoding ----------------------------------------------------------------------------------


@pytest.mark.parametrize("coding", CODINGS)
@pytest.mark.parametrize("chunk_size", [1, 1000, 10 * MIB])
async def test_every_coding_decodes_whatever_the_chunking(coding: str, chunk_size: int) -> None:
    body = encode(TEXT, coding)
    if chunk_size == 1:
        body = encode(TEXT[:5000], coding)
    chunks = split(body, chunk_size)
    out = await collect(DecodedChunks(Chunks(chunks), header_name(coding)))
    assert b"".join(out) == (TEXT if chunk_size != 1 else TEXT[:5000])


async def test_concatenated_gzip_members_are_one_body() -> None:
    body = encode(b"first,", "gzip") + encode(b"second", "gzip")
    out = await collect(DecodedChunks(Chunks(split(body, 7)), "gzip"))
    assert b"".join(out) == b"first,second"


async def test_codings_applied_on_top_of_each_other_are_undone_last_first() -> None:
    body = encode(encode(TEXT, "gzip"), "br")  # Content-Encoding: gzip, br
    out = await collect(decoded(Chunks([body]), ("gzip", "br")))
    assert b"".join(out) == TEXT


async def test_an_empty_body_decodes_to_nothing() -> None:
    for coding in ("gzip", "deflate", "br"):
        assert await collect(DecodedChunks(Chunks([]), coding)) == []
        assert await collect(DecodedChunks(Chunks([b""]), coding)) == []


@pytest.mark.parametrize("coding", CODINGS)
async def test_each_piece_is_bounded_whatever_the_ratio(coding: str) -> None:
    pieces = await collect(DecodedChunks(Chunks([bomb(coding, 16 * MIB)]), header_name(coding)))
    assert sum(map(len, pieces)) == 16 * MIB
    # brotli's output buffer grows in blocks past its limit; zlib's never does
    assert max(map(len, pieces)) <= (2 * SLICE_BYTES if coding == "br" else SLICE_BYTES)


@pytest.mark.parametrize("coding", CODINGS)
async def test_the_limit_stops_decoding_soon_after_it_is_passed(coding: str) -> None:
    pieces: list[int] = []
    with pytest.raises(DecodedTooLarge) as caught:
        async for piece in DecodedChunks(
            Chunks(split(bomb(coding, 64 * MIB), INPUT_BYTES)), header_name(coding), 4 * MIB
        ):
            pieces.append(len(piece))
    assert caught.value.limit == 4 * MIB
    assert sum(pieces) <= 4 * MIB  # what was handed out stays under the limit
    assert len(pieces) <= 4 * MIB // (SLICE_BYTES // 2)  # and decoding stopped right there


async def test_decode_body_returns_a_body_within_the_limit_and_refuses_one_over_it() -> None:
    assert await decode_body(encode(TEXT, "gzip"), ("gzip",), len(TEXT)) == TEXT
    with pytest.raises(DecodedTooLarge):
        await decode_body(encode(TEXT, "gzip"), ("gzip",), len(TEXT) - 1)
    assert await decode_body(b"", ("gzip",), 10) == b""  # no body: nothing to decode
    assert await decode_body(b"plain", (), 1) == b"plain"  # no coding: nothing to check


async def test_the_limit_holds_at_every_layer_of_a_chained_body() -> None:
    # the inner gzip data alone is over the limit: decoding stops before it is all there
    inner = bomb("gzip", 64 * MIB)
    with pytest.raises(DecodedTooLarge):
        await decode_body(encode(inner, "br"), ("gzip", "br"), len(inner) // 2)


@pytest.mark.parametrize(
    ("coding", "body", "problem"),
    [
        ("gzip", b"not gzip at all", "not valid gzip data"),
        ("deflate", b"\x78\x9c\xff\xff\xff", "not valid deflate data"),
        ("br", b"\xff" * 50, "not valid br data"),
        ("gzip", encode(TEXT, "gzip")[:-20], "ends before its end"),
        ("deflate", encode(TEXT, "deflate")[:-20], "ends before its end"),
        ("br", encode(TEXT, "br")[:-20], "ends before its end"),
        ("deflate", encode(b"x", "deflate") + b"more", "after the end of the deflate stream"),
        ("gzip", encode(b"x", "gzip") + b"trailing garbage", "not valid gzip data"),
    ],
)
async def test_bytes_that_are_not_their_coding_are_corrupt(
    coding: str, body: bytes, problem: str
) -> None:
    with pytest.raises(CorruptBody, match=problem):
        await decode_body(body, (coding,), 100 * MIB)


async def test_an_unknown_coding_is_refused_when_decoding_starts() -> None:
    with pytest.raises(UnsupportedCoding):
        DecodedChunks(Chunks([b"x"]), "zstd")


# -- the event loop goes on --------------------------------------------------------------------


@pytest.mark.parametrize("coding", ["gzip", "br"])
async def test_the_event_loop_runs_between_the_steps_of_a_bomb(coding: str) -> None:
    """Another task gets the loop between every two pieces: no step holds it for long."""
    turns = 0
    done = asyncio.Event()

    async def other_task() -> None:
        nonlocal turns
        while not done.is_set():
            turns += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(other_task())
    await asyncio.sleep(0)
    seen: list[int] = []
    async for _piece in DecodedChunks(Chunks([bomb(coding, 32 * MIB)]), coding):
        seen.append(turns)
    done.set()
    await ticker
    assert len(seen) >= 32 * MIB // (2 * SLICE_BYTES)
    assert all(later > earlier for earlier, later in itertools.pairwise(seen))
