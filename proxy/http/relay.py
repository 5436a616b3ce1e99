"""Writing a completion's `Reply` to the client: a whole body, or a stream write by write."""

from __future__ import annotations

import logging

from aiohttp import web

from proxy.completion.reply import ChunkStream, Reply
from proxy.errors import ProxyError
from proxy.http.middleware import REQUEST_ID_HEADER
from proxy.http.services import REQUEST_ID

log = logging.getLogger("ctxproxy.http")


async def respond(request: web.Request, reply: Reply) -> web.StreamResponse:
    """The response for `reply`; a stream is written to its end or until the client has gone."""
    if reply.stream is None:
        return web.Response(body=reply.body, status=reply.status, headers=reply.headers)
    return await _write_stream(request, reply, reply.stream)


async def _write_stream(
    request: web.Request, reply: Reply, stream: ChunkStream
) -> web.StreamResponse:
    """One client write per item; the stream is always closed (that releases the upstream).

    A stream that fails after the headers went out (a relayed body whose upstream broke, or a
    bug) cannot be answered with an error any more: the connection is closed without the body's
    end, so the client sees a cut, never a body that looks complete nor one left open.
    """
    try:
        headers = reply.headers
        headers[REQUEST_ID_HEADER] = request[REQUEST_ID]
        response = web.StreamResponse(status=reply.status, headers=headers)
        await response.prepare(request)
        try:
            async for chunk in stream:
                await response.write(chunk)
        except ConnectionResetError:  # the client has gone: stop reading the upstream
            return response
        except ProxyError as exc:
            log.warning(
                "relayed body broke after it started (%s): connection cut",
                exc.code.name,
                extra={"request_id": request[REQUEST_ID]},
            )
            return _cut(request, response)
        except Exception:  # a bug: the edge's 500 can no longer be sent, the client must not wait
            log.exception(
                "stream failed after it started: connection cut",
                extra={"request_id": request[REQUEST_ID]},
            )
            return _cut(request, response)
        await response.write_eof()
        return response
    finally:
        await stream.aclose()


def _cut(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    if request.transport is not None:
        request.transport.close()
    return response
