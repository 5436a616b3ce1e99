"""A request's body: read within `server.body_timeout_s`, its content coding undone, its JSON.

aiohttp's own decompression is off (`server.EdgeRunner`): it inflated a body as it arrived, on
the event loop and before the request was authenticated, so a 1 MB gzip body inflating to 1 GB
stalled every other request for seconds, even one sent to `/healthz` without a key. A body is
decoded here, only when a handler reads it (the middleware authenticated the request first), in
steps with the event loop running between them (`proxy.codings`), and no further than
`server.max_body_bytes` of decoded bytes (413 `request_too_large`). A coding the proxy does not
decode is a 415 (`unsupported_content_encoding`), bytes that are not valid in their coding a 400
(`invalid_content_encoding`). Routes that read no body never look at `Content-Encoding`. The body
goes upstream decoded, without the client's `Content-Encoding` (`upstream.headers`).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from aiohttp import web

from proxy.codings import (
    SUPPORTED,
    CorruptBody,
    DecodedTooLarge,
    UnsupportedCoding,
    decode_body,
    parse_content_encoding,
)
from proxy.errors import ErrorCode, ProxyError
from proxy.http.services import SERVICES
from proxy.jsonio import loads_object

_JSON_TYPES = ("application/json", "text/json")
LARGE_BODY_BYTES = 1024 * 1024
"""From this size a body is joined and parsed, and a dry run answered, in a worker thread (the
default executor: a few threads), not on the event loop."""
SLICED_BODY_BYTES = 4 * 1024 * 1024
"""From this size a body is parsed in slices (`proxy.jsonio.slices`: no orjson call holds the
GIL for long, but the slicer's structure scan costs ~8x the CPU of one orjson call). Below it
one orjson call in the worker holds the GIL for ~1 ms per MB (idle core), which the event loop
can wait; the passthrough of a 1 MB body spent ~6 of its ~7 ms of parsing in the slicer."""
ACCEPTED_CODINGS = ", ".join(("identity", *SUPPORTED))
"""The request codings the proxy decodes (the `Accept-Encoding` of its 415)."""


async def read_json_body(request: web.Request) -> tuple[bytes, dict[str, Any]]:
    """The raw bytes (forwarded as they are when nothing changes) and the parsed object."""
    content_type = request.headers.get("Content-Type", "")
    media = content_type.split(";", 1)[0].strip().lower()
    if media and media not in _JSON_TYPES and not media.endswith("+json"):
        raise ProxyError(
            ErrorCode.unsupported_media_type,
            f"Content-Type {media!r} is not supported; send application/json",
        )
    raw = await read_body(request)
    if not raw:
        raise ProxyError(ErrorCode.invalid_json, "Request body is empty; expected a JSON object")
    if len(raw) >= LARGE_BODY_BYTES:  # off the loop; in slices when very large
        sliced = len(raw) >= SLICED_BODY_BYTES
        body = await asyncio.to_thread(partial(loads_object, raw, sliced=sliced))
    else:
        body = loads_object(raw)
    _check_stream_flag(body)
    return raw, body


def _check_stream_flag(body: dict[str, Any]) -> None:
    """`stream` is a boolean or null, as OpenAI requires: the proxy and the upstream must agree
    on whether the answer streams (1 or "true" would stream upstream but not for the proxy)."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ProxyError(
            ErrorCode.invalid_request,
            f"Invalid type for 'stream': expected a boolean, but got {type(stream).__name__}",
            param="stream",
        )


async def read_body(request: web.Request) -> bytes:
    """The whole request body, decoded from its `Content-Encoding`."""
    return await _decoded(request, await _arrived(request))


async def _arrived(request: web.Request) -> bytes:
    """The body as sent, within `server.body_timeout_s` (a slow client gets 408)."""
    if request.content.is_eof():  # all of it is here already (most small bodies): no deadline
        return await _received(request)
    limit = request.app[SERVICES].settings.server.body_timeout_s
    try:
        async with asyncio.timeout(limit):
            return await _received(request)
    except TimeoutError:
        raise ProxyError(
            ErrorCode.request_timeout, f"The request body did not arrive within {limit:g}s"
        ) from None


async def _received(request: web.Request) -> bytes:
    """What `request.read()` returns (and its 413 past `client_max_size`), except that a large
    body's pieces are joined in a worker thread: `bytes.join` copies without the GIL, where
    aiohttp's `bytes(bytearray)` held the event loop for the whole copy (tens of ms at 30 MB on
    a busy host)."""
    chunks: list[bytes] = []
    size, limit = 0, request.client_max_size
    while chunk := await request.content.readany():
        chunks.append(chunk)
        size += len(chunk)
        if limit and size > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size)
    if size < LARGE_BODY_BYTES:
        return b"".join(chunks)
    return await asyncio.to_thread(b"".join, chunks)


async def _decoded(request: web.Request, raw: bytes) -> bytes:
    header = ", ".join(request.headers.getall("Content-Encoding", ()))
    if not raw or not header:
        return raw
    limit = request.app[SERVICES].settings.server.max_body_bytes
    try:
        return await decode_body(raw, parse_content_encoding(header), limit)
    except UnsupportedCoding as exc:
        raise ProxyError(
            ErrorCode.unsupported_content_encoding,
            f"{exc}; send the body as one of: {ACCEPTED_CODINGS}",
        ) from None
    except DecodedTooLarge:
        raise ProxyError(
            ErrorCode.request_too_large,
            f"Request body is larger than {limit} bytes once decoded "
            f"(Content-Encoding: {header[:40]}; server.max_body_bytes)",
        ) from None
    except CorruptBody as exc:
        raise ProxyError(
            ErrorCode.invalid_content_encoding,
            f"The request body does not decode as its Content-Encoding says: {exc}",
        ) from None
