"""The edge: request ids, auth -> tenant, the store lease around the handler, and the one place
errors become HTTP responses.

Errors before a response starts are answered in the envelope of the route's format
(`routes.format_of`); errors after a stream has started are SSE events of the client's format,
written by whoever produces the stream.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from proxy.errors import ErrorCode, ProxyError
from proxy.http.body import ACCEPTED_CODINGS
from proxy.http.console import is_console_path
from proxy.http.routes import COMPLETION_ROUTES, OPERATOR_ROUTES, format_of, route_of
from proxy.http.services import REQUEST_ID, SERVICES, STATS, TENANT
from proxy.http.store_lease import store_lease
from proxy.jsonio import dumps
from proxy.logs import access_fields, access_log, access_logged
from proxy.records.build import Ending
from proxy.records.recorder import Recorder
from proxy.stats import RequestStats

log = logging.getLogger("ctxproxy.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REQUEST_ID_HEADER = "x-ctxproxy-request-id"
_UNAUTHENTICATED = frozenset({"/", "/healthz", "/readyz"})
METRICS_ROUTE = "/metrics"
CLIENT_CLOSED = 499
"""The status recorded when the client went away (or the handler was cancelled) mid-request."""


def json_error(error: ProxyError, request_id: str, path: str = "") -> web.Response:
    """The error answer, in the envelope of the route's format."""
    envelope = format_of(path).error_envelope(error, request_id)
    headers = {REQUEST_ID_HEADER: request_id}
    if error.code is ErrorCode.unsupported_content_encoding:  # RFC 9110 15.5.16
        headers["Accept-Encoding"] = ACCEPTED_CODINGS
    return web.Response(
        body=dumps(envelope),
        status=error.code.status,
        content_type="application/json",
        headers=headers,
    )


def _http_exception_error(exc: web.HTTPException) -> ProxyError:
    if exc.status == 413:
        return ProxyError(ErrorCode.request_too_large, "Request body is too large", param=None)
    if exc.status == 405:
        return ProxyError(ErrorCode.method_not_allowed, f"Method not allowed: {exc.reason}")
    return ProxyError(ErrorCode.not_found, "Unknown route. ctxproxy serves /v1/* and /healthz.")


@web.middleware
async def edge_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request_id = os.urandom(16).hex()
    request[REQUEST_ID] = request_id
    stats = request[STATS] = RequestStats()
    status = CLIENT_CLOSED
    response = None
    try:
        response = await _answer(request, handler, request_id, stats)
        status = response.status
        return response
    finally:
        _observe(request, request_id, status, stats, response)


async def _answer(
    request: web.Request, handler: Handler, request_id: str, stats: RequestStats
) -> web.StreamResponse:
    try:
        if _needs_a_tenant(request):
            tenants = request.app[SERVICES].tenants
            operator_route = tenants.has_operators and route_of(request) in OPERATOR_ROUTES
            tenant = tenants.resolve(request.headers, operator_route=operator_route)
            request[TENANT] = tenant
            stats.tenant, stats.policy = tenant.name, tenant.policy
        with store_lease(request):
            response = await handler(request)
    except ProxyError as exc:
        stats.error, stats.reason, stats.error_details = exc.code.name, exc.reason, exc.details
        _note_refusal(request, exc)
        return json_error(exc, request_id, request.path)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return json_error(_http_exception_error(exc), request_id, request.path)
    except ConnectionResetError:
        raise
    except Exception:
        log.exception("unhandled error", extra={"request_id": request_id})
        error = ProxyError(ErrorCode.internal_error, "Internal proxy error")
        return json_error(error, request_id, request.path)
    if not response.prepared:
        response.headers[REQUEST_ID_HEADER] = request_id
    return response


def _needs_a_tenant(request: web.Request) -> bool:
    """Every route but the probes and the console's static page (its data fetches carry the
    key); /metrics per `server.metrics_auth`."""
    if request.path == METRICS_ROUTE:
        return request.app[SERVICES].settings.metrics_need_a_key
    return request.path not in _UNAUTHENTICATED and not is_console_path(request.path)


def _note_refusal(request: web.Request, error: ProxyError) -> None:
    """A chat completion refused by preparation (dry runs are not counted)."""
    if route_of(request) not in COMPLETION_ROUTES:
        return
    if error.reason is not None:
        request.app[SERVICES].metrics.record_refusal(error.reason)


def _observe(
    request: web.Request,
    request_id: str,
    status: int,
    stats: RequestStats,
    response: web.StreamResponse | None,
) -> None:
    """Request metrics, the access line and the request's record; never lets a failure here
    replace the answer."""
    try:
        route = route_of(request)
        services = request.app[SERVICES]
        services.metrics.record_request(route, status, stats)
        duration = time.perf_counter() - stats.started
        if access_logged(route, status):
            access_log(access_fields(request_id, request.method, route, status, stats, duration))
        if services.recorder is not None and route in COMPLETION_ROUTES:
            headers = response.headers if response is not None else {}
            wire = COMPLETION_ROUTES[route]
            end = Ending(request_id, route, wire, status, headers, duration, time.time())
            _record(request, services.recorder, stats, end)
    except Exception:
        log.exception("recording request metrics failed", extra={"request_id": request_id})


def _record(request: web.Request, recorder: Recorder, stats: RequestStats, end: Ending) -> None:
    """Hand the completion's record to the recorder (written later, off this response)."""
    tenant = request.get(TENANT)
    if tenant is None or tenant.anonymous:  # unauthenticated, or nothing of it is kept
        return
    if stats.scope is None:
        stats.scope = tenant.scope
    recorder.submit(tenant.owner_scope, stats, end)
