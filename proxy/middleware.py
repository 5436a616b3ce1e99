"""The edge: request ids, auth -> tenant, and the one place errors become HTTP responses."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable

from aiohttp import web

from proxy.errors import ErrorCode, ProxyError, error_envelope
from proxy.jsonio import dumps
from proxy.services import REQUEST_ID, SERVICES, TENANT

log = logging.getLogger("ctxproxy.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REQUEST_ID_HEADER = "x-ctxproxy-request-id"
_UNAUTHENTICATED = frozenset({"/healthz", "/readyz", "/metrics"})


def json_error(error: ProxyError, request_id: str) -> web.Response:
    return web.Response(
        body=dumps(error.envelope(request_id)),
        status=error.code.status,
        content_type="application/json",
        headers={REQUEST_ID_HEADER: request_id},
    )


def _http_exception_error(exc: web.HTTPException) -> ProxyError:
    if exc.status == 413:
        return ProxyError(ErrorCode.request_too_large, "Request body is too large", param=None)
    if exc.status == 405:
        return ProxyError(ErrorCode.method_not_allowed, f"Method not allowed: {exc.reason}")
    return ProxyError(ErrorCode.not_found, "Unknown route. ctxproxy serves /v1/* and /healthz.")


@web.middleware
async def edge_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request_id = uuid.uuid4().hex
    request[REQUEST_ID] = request_id
    try:
        if request.path not in _UNAUTHENTICATED:
            request[TENANT] = request.app[SERVICES].tenants.resolve(request.headers)
        response = await handler(request)
    except ProxyError as exc:
        return json_error(exc, request_id)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return json_error(_http_exception_error(exc), request_id)
    except ConnectionResetError:
        raise
    except Exception:
        log.exception("unhandled error", extra={"request_id": request_id})
        error = ProxyError(ErrorCode.internal_error, "Internal proxy error")
        return json_error(error, request_id)
    if not response.prepared:
        response.headers[REQUEST_ID_HEADER] = request_id
    return response


def error_event(error: ProxyError, request_id: str) -> bytes:
    """An error after the stream has started: one SSE `data:` event in the OpenAI envelope."""
    body = error_envelope(
        error.code, error.message, param=error.param, details=error.details, request_id=request_id
    )
    return b"data: " + dumps(body) + b"\n\n"
