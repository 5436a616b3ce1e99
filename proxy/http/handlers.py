"""Thin aiohttp handlers: parse, delegate, answer."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from proxy.artifacts.store import StoreUnavailable
from proxy.completion.driver import ClientRequest
from proxy.completion.reply import relayed
from proxy.engine.manifest import Prepared
from proxy.errors import ErrorCode, ProxyError
from proxy.formats import FORMATS
from proxy.formats.base import ClientFormat
from proxy.http.auth import Tenant
from proxy.http.body import LARGE_BODY_BYTES, read_body, read_json_body
from proxy.http.console import add_console_routes
from proxy.http.records import add_record_routes
from proxy.http.relay import respond
from proxy.http.routes import (
    COMPLETION_ROUTES,
    COUNT_TOKENS_ROUTE,
    DEFAULT_FORMAT,
    format_of,
    route_of,
)
from proxy.http.services import REQUEST_ID, SERVICES, STATS, TENANT
from proxy.jsonio import dumps, loads_object, long_strings
from proxy.metrics import CONTENT_TYPE_LATEST
from proxy.synthetic.read import HARD_MAX_PAGE_CHARS, read_result
from proxy.upstream.base import Upstream
from proxy.upstream.headers import forward_request_headers

_MAX_QUERY_DIGITS = 15


async def complete(request: web.Request) -> web.StreamResponse:
    """`POST` to a route of `COMPLETION_ROUTES` (chat completions, Messages, Responses): the
    request in its route's format through the engine and upstream. A Responses request that
    continues history the provider holds (`previous_response_id`, `conversation`) is forwarded as
    it came, the manifest saying it was not prepared."""
    return await _complete(request, format_of(route_of(request)))


async def count_tokens(request: web.Request) -> web.Response:
    """`POST /v1/messages/count_tokens`: the proxy's count of the request as it would go upstream
    (prepared under the tenant's policy; a request that could not fit counts as refused).

    The count depends on the output the call reserves: with the body's `max_tokens` it is what
    `messages.create` with that `max_tokens` sends; without (Anthropic's counting takes none) the
    policy's default reserve is assumed. `ctxproxy` says which, and the tokens before preparation.
    """
    client = await _client_request(request, format_of(COUNT_TOKENS_ROUTE))
    assumed = "max_tokens" if client.wire.output_limit(client.body) is not None else "default"
    try:
        prepared = await request.app[SERVICES].started_driver().prepare(client)
    except ProxyError as exc:
        final = (exc.details or {}).get("final_tokens")
        if exc.code is not ErrorCode.context_length_exceeded or not isinstance(final, int):
            raise
        return web.json_response({"input_tokens": final})
    manifest = prepared.manifest
    details = {
        "tokens_before": manifest.tokens_before,
        "outcome": manifest.outcome.value,
        "reserved_output": manifest.reserved_output,
        "reserved_output_from": assumed,
    }
    tokens = manifest.tokens_after or manifest.tokens_before
    return web.json_response({"input_tokens": tokens, "ctxproxy": details})


async def _complete(request: web.Request, wire: ClientFormat) -> web.StreamResponse:
    client = await _client_request(request, wire)
    reply = await request.app[SERVICES].started_driver().complete(client)
    return await respond(request, reply)


async def _client_request(request: web.Request, wire: ClientFormat) -> ClientRequest:
    raw, body = await read_json_body(request)
    return _client_request_of(request, wire, raw, body)


def _client_request_of(
    request: web.Request, wire: ClientFormat, raw: bytes, body: dict[str, Any]
) -> ClientRequest:
    """The request as the driver takes it: its body, its tenant, its upstream and credentials."""
    services = request.app[SERVICES]
    tenant: Tenant = request[TENANT].in_body_session(body)
    stats = request[STATS]
    stats.scope, stats.model, stats.stream = (
        tenant.scope,
        wire.model(body),
        body.get("stream") is True,
    )
    upstream = services.upstream_for(stats.model, tenant.routes)
    windows = services.windows.for_request(upstream, _upstream_headers(request, tenant, upstream))

    def headers_for(other: Upstream) -> CIMultiDict[str]:
        """A summarizer's upstream named by the policy: the tenant's credentials for it, in
        that upstream's style."""
        return _upstream_headers(request, tenant, other)

    return ClientRequest(wire, body, raw, tenant, windows, headers_for, stats, request[REQUEST_ID])


def _upstream_headers(request: web.Request, tenant: Tenant, upstream: Upstream) -> CIMultiDict[str]:
    """The client's headers for `upstream`, with the credentials the tenant sends there."""
    return forward_request_headers(
        request.headers,
        tenant.upstream_authorization(upstream.settings),
        api_key_header=upstream.api_key_header,
        pass_forwarding=upstream.settings.forwarded_headers == "pass",
    )


async def prepare_dry_run(request: web.Request) -> web.Response:
    """The exact upstream body and the manifest; `?format=anthropic_messages` for a Messages
    body (default `openai_chat`)."""
    raw, body = await read_json_body(request)
    client = _client_request_of(request, _dry_run_format(request), raw, body)
    prepared = await request.app[SERVICES].started_driver().prepare(client, estimate_cost=True)
    if len(client.raw) >= LARGE_BODY_BYTES:  # long strings written in slices, off the loop
        answer = await asyncio.to_thread(_large_dry_run_answer, prepared)
    else:
        answer = _dry_run_answer(prepared)
    return web.Response(body=answer, content_type="application/json")


def _dry_run_format(request: web.Request) -> ClientFormat:
    """The body's format: `?format=` names one of `FORMATS` (a chat completion by default)."""
    name = request.query.get("format", DEFAULT_FORMAT)
    wire = FORMATS.get(name)
    if wire is None:
        known = ", ".join(sorted(FORMATS))
        raise ProxyError(
            ErrorCode.invalid_request, f"Unknown format {name!r} (known: {known})", param="format"
        )
    return wire


def _large_dry_run_answer(prepared: Prepared) -> bytes:
    with long_strings():
        return _dry_run_answer(prepared)


def _dry_run_answer(prepared: Prepared) -> bytes:
    payload = {
        "changed": prepared.changed,
        "body": prepared.parsed,
        "manifest": prepared.manifest.as_dict(),
    }
    return dumps(payload)


async def read_artifact(request: web.Request) -> web.Response:
    """One page of an artifact of the caller's tenant (and session): the read tool's result as
    JSON."""
    services = request.app[SERVICES]
    tenant: Tenant = request[TENANT].in_query_session(request.query)
    artifact_id = request.match_info["artifact_id"]
    offset = _query_int(request, "offset", 0, minimum=0)
    max_chars = min(
        _query_int(request, "max_chars", HARD_MAX_PAGE_CHARS, minimum=1), HARD_MAX_PAGE_CHARS
    )
    try:
        artifact = await services.started_store().get(tenant.scope, artifact_id)
    except StoreUnavailable as exc:
        services.metrics.record_endpoint_read("artifact_store_unavailable")
        raise ProxyError(
            ErrorCode.artifact_store_unavailable, "The artifact store is temporarily unavailable"
        ) from exc
    services.metrics.record_endpoint_read("found" if artifact is not None else "artifact_not_found")
    if artifact is None:
        raise ProxyError(
            ErrorCode.artifact_not_found, f"No artifact {artifact_id!r} (unknown or expired)"
        )
    page = read_result(artifact, offset, max_chars)
    layout = artifact.meta.get("content_parts")
    if layout is not None:  # a result sent as content parts: how to rebuild the list
        page["content_parts"] = layout
    return web.Response(body=dumps(page), content_type="application/json")


def _query_int(request: web.Request, name: str, default: int, *, minimum: int) -> int:
    """A non-negative decimal query parameter; more than `_MAX_QUERY_DIGITS` digits is a 400
    (never `int()` on a client's string of any length: Python refuses over 4,300 digits)."""
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    digits = raw.isascii() and raw.isdigit() and len(raw) <= _MAX_QUERY_DIGITS
    value = int(raw) if digits else minimum - 1
    if value < minimum:
        raise ProxyError(
            ErrorCode.invalid_request,
            f"'{name}' must be an integer >= {minimum} of at most {_MAX_QUERY_DIGITS} digits",
            param=name,
        )
    return value


async def passthrough(request: web.Request) -> web.StreamResponse:
    """Any other /v1/* route: forwarded to the upstream that serves its model (the body decoded,
    like every body the proxy sends), its answer relayed in the coding the client accepts."""
    services = request.app[SERVICES]
    tenant: Tenant = request[TENANT]
    body = await read_body(request) if request.body_exists else None
    upstream = services.upstream_for(_model_hint(request, body), tenant.routes)
    headers = _upstream_headers(request, tenant, upstream)
    headers["Accept-Encoding"] = request.headers.get("Accept-Encoding", "identity")
    answer = await upstream.open(
        request.method,
        request.match_info["tail"],
        headers=headers,
        body=body,
        query=request.rel_url.raw_query_string,
        timer=request[STATS],
    )
    reply = await relayed(
        answer, {}, request[REQUEST_ID], format_of(request.path).relayed_error_event, encoded=True
    )
    return await respond(request, reply)


def _model_hint(request: web.Request, body: bytes | None) -> str:
    if not body or not request.content_type.endswith("json"):
        return ""
    try:
        return format_of(request.path).model(loads_object(body))
    except ProxyError:
        return ""


async def healthz(request: web.Request) -> web.Response:
    """Alive; a worker of `--workers N` also says which (its process id)."""
    peers = request.app[SERVICES].peers
    if peers is None:
        return web.json_response({"status": "ok"})
    return web.json_response({"status": "ok", "worker": peers.pid})


async def root(request: web.Request) -> web.Response:
    """`GET /` and `HEAD /`: what a provider's root answers (clients such as Claude Code probe
    it before their first request), without credentials."""
    return web.Response(text="ctxproxy: an LLM context proxy. It serves /v1/*.\n")


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format (no keys or key hashes in labels); needs a proxy key per
    `server.metrics_auth` (by default in auth mode 'keys', where labels name tenants). With
    `--workers N`, the sum over the workers (`proxy.workers.peers`)."""
    services = request.app[SERVICES]
    body = services.metrics.render() if services.peers is None else await services.peers.scrape()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def readyz(request: web.Request) -> web.Response:
    """Ready when the store answers and policies are loaded. A policy edit that failed to load
    leaves the previous policies in use: still ready (the service works), but `degraded`, with
    the problems, so that it is seen beyond the log line."""
    services = request.app[SERVICES]
    store_ok = bool(await services.store.ping()) if services.store is not None else True
    policies_ok = services.policies is not None
    status = 200 if store_ok and policies_ok else 503
    failure = services.policies.reload_failure if services.policies is not None else None
    state = "ready" if failure is None else "degraded"
    body: dict[str, Any] = {
        "status": state if status == 200 else "not_ready",
        "store": store_ok,
        "policies": policies_ok,
    }
    if failure is not None:
        body["policy_reload_failure"] = failure
    return web.json_response(body, status=status)


def add_routes(app: web.Application) -> None:
    for route in COMPLETION_ROUTES:
        app.router.add_post(route, complete)
    app.router.add_post(COUNT_TOKENS_ROUTE, count_tokens)
    app.router.add_post("/v1/context/prepare", prepare_dry_run)
    app.router.add_get("/v1/context/artifacts/{artifact_id}", read_artifact)
    add_record_routes(app)
    app.router.add_get("/", root)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    add_console_routes(app)
    app.router.add_route("*", "/v1/{tail:.*}", passthrough)
