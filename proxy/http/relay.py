"""Relaying an upstream answer to the client: whole JSON bodies, or SSE chunk by chunk."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import aiohttp
from aiohttp import web

from proxy.http.middleware import error_event
from proxy.http.services import REQUEST_ID
from proxy.upstream.openai_http import relay_response_headers, upstream_read_error


def is_event_stream(response: aiohttp.ClientResponse) -> bool:
    return response.headers.get("Content-Type", "").startswith("text/event-stream")


async def relay(
    request: web.Request,
    upstream: aiohttp.ClientResponse,
    extra_headers: Mapping[str, str],
    upstream_name: str,
) -> web.StreamResponse:
    """Relay status, headers and body; the upstream response is always closed afterwards."""
    try:
        if is_event_stream(upstream):
            return await _relay_stream(request, upstream, extra_headers, upstream_name)
        try:
            body = await upstream.read()
        except (aiohttp.ClientError, TimeoutError, asyncio.IncompleteReadError) as exc:
            raise upstream_read_error(exc, upstream_name) from exc
        headers = relay_response_headers(upstream.headers)
        headers.update(extra_headers)
        return web.Response(body=body, status=upstream.status, headers=headers)
    finally:
        upstream.close()


async def _relay_stream(
    request: web.Request,
    upstream: aiohttp.ClientResponse,
    extra_headers: Mapping[str, str],
    upstream_name: str,
) -> web.StreamResponse:
    headers = relay_response_headers(upstream.headers)
    headers.update(extra_headers)
    headers["x-ctxproxy-request-id"] = request[REQUEST_ID]
    response = web.StreamResponse(status=upstream.status, headers=headers)
    await response.prepare(request)
    chunks = upstream.content.iter_any().__aiter__()
    while True:
        try:
            chunk = await chunks.__anext__()
        except StopAsyncIteration:
            break
        except (aiohttp.ClientError, TimeoutError, asyncio.IncompleteReadError) as exc:
            error = upstream_read_error(exc, upstream_name)
            await _write_or_gone(response, error_event(error, request[REQUEST_ID]))
            return response
        if not await _write_or_gone(response, chunk):
            return response
    await response.write_eof()
    return response


async def _write_or_gone(response: web.StreamResponse, data: bytes) -> bool:
    """Write to the client; False when the client has gone (the caller then stops reading)."""
    try:
        await response.write(data)
    except ConnectionResetError:
        return False
    return True
