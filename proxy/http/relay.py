"""Writing a completion's `Reply` to the client: a whole body, or a stream write by write."""

from __future__ import annotations

from aiohttp import web

from proxy.completion.reply import ChunkStream, Reply
from proxy.http.middleware import REQUEST_ID_HEADER
from proxy.http.services import REQUEST_ID


async def respond(request: web.Request, reply: Reply) -> web.StreamResponse:
    """The response for `reply`; a stream is written to its end or until the client has gone."""
    if reply.stream is None:
        return web.Response(body=reply.body, status=reply.status, headers=reply.headers)
    return await _write_stream(request, reply, reply.stream)


async def _write_stream(
    request: web.Request, reply: Reply, stream: ChunkStream
) -> web.StreamResponse:
    """One client write per item; the stream is always closed (that releases the upstream)."""
    try:
        headers = reply.headers
        headers[REQUEST_ID_HEADER] = request[REQUEST_ID]
        response = web.StreamResponse(status=reply.status, headers=headers)
        await response.prepare(request)
        async for chunk in stream:
            try:
                await response.write(chunk)
            except ConnectionResetError:  # the client has gone: stop reading the upstream
                return response
        await response.write_eof()
        return response
    finally:
        await stream.aclose()
