"""Thin aiohttp handlers: parse, delegate, answer."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from proxy.artifacts.read_tool import HARD_MAX_PAGE_CHARS, read_result
from proxy.artifacts.store import StoreUnavailable
from proxy.completion.reply import relayed
from proxy.completion.retry import PrepareAgain
from proxy.completion.round_fit import Refit
from proxy.completion.run import CompletionContext, run_completion
from proxy.completion.summarizer import UpstreamSummarizer
from proxy.engine.manifest import NoteCode, Prepared
from proxy.engine.prepare_request import FOLLOW_UP
from proxy.errors import ErrorCode, ProxyError
from proxy.formats import FORMATS
from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES
from proxy.formats.base import ChatFormat
from proxy.formats.openai_chat import OPENAI_CHAT, request_model
from proxy.formats.openai_responses import OPENAI_RESPONSES, provider_history
from proxy.http.auth import Tenant
from proxy.http.body import LARGE_BODY_BYTES, read_body, read_json_body
from proxy.http.relay import respond
from proxy.http.services import REQUEST_ID, SERVICES, STATS, TENANT, Services
from proxy.jsonio import dumps, loads_object
from proxy.metrics import CONTENT_TYPE_LATEST
from proxy.upstream.base import Upstream
from proxy.upstream.headers import forward_request_headers
from proxy.upstream.windows import RequestWindows

_MAX_QUERY_DIGITS = 15


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _complete(request, OPENAI_CHAT)


async def messages(request: web.Request) -> web.StreamResponse:
    """`POST /v1/messages`: Anthropic Messages through the same engine."""
    return await _complete(request, ANTHROPIC_MESSAGES)


async def count_tokens(request: web.Request) -> web.Response:
    """`POST /v1/messages/count_tokens`: the proxy's count of the request as it would go upstream
    (prepared under the tenant's policy; a request that could not fit counts as refused)."""
    services = request.app[SERVICES]
    raw, body = await read_json_body(request)
    tenant: Tenant = request[TENANT].in_body_session(body)
    wire = ANTHROPIC_MESSAGES
    windows = _request_windows(request, services, tenant, wire.model(body))
    try:
        prepared = await services.started_preparer().prepare(body, raw, tenant, wire, windows)
    except ProxyError as exc:
        final = (exc.details or {}).get("final_tokens")
        if exc.code is not ErrorCode.context_length_exceeded or not isinstance(final, int):
            raise
        return web.json_response({"input_tokens": final})
    _note_prepared(request, prepared)
    tokens = prepared.manifest.tokens_after or prepared.manifest.tokens_before
    return web.json_response({"input_tokens": tokens})


async def responses(request: web.Request) -> web.StreamResponse:
    """`POST /v1/responses`: prepared like a chat completion, unless the request continues
    history the provider holds (`previous_response_id`, `conversation`): then forwarded as it
    came, the manifest saying it was not prepared."""
    return await _complete(request, OPENAI_RESPONSES)


async def _complete(request: web.Request, wire: ChatFormat) -> web.StreamResponse:
    services = request.app[SERVICES]
    raw, body = await read_json_body(request)
    tenant: Tenant = request[TENANT].in_body_session(body)
    windows = _request_windows(request, services, tenant, wire.model(body))
    summarizer = _summarizer(request, services, tenant, windows, wire.model(body))
    preparer = services.started_preparer()
    held = provider_history(body) if wire is OPENAI_RESPONSES else None
    if held is not None:
        why = f"not prepared: '{held}' continues history the provider holds, forwarded unchanged"
        prepared = preparer.unprepared(body, raw, tenant, wire, why)
    else:
        prepared = await preparer.prepare(body, raw, tenant, wire, windows, summarizer=summarizer)
    _note_prepared(request, prepared)
    services.metrics.record_preparation(prepared.manifest)

    async def prepare_again(window: int) -> Prepared | None:
        """The upstream stated `window` in an overflow error: remember it, prepare again."""
        windows.record_stated(prepared.manifest.model, window)
        again = await preparer.prepare(
            body, raw, tenant, wire, windows, summarizer=summarizer
        )
        if again.body == prepared.body:
            return None
        again.manifest.note(
            NoteCode.retried_after_overflow,
            f"the upstream refused the first attempt as too long (window {window}): "
            "prepared again and retried once",
        )
        _note_prepared(request, again)
        return again

    async def refit(body: dict[str, Any], raw: bytes, last_resort: bool) -> Prepared:
        """A follow-up call of the synthetic loop, prepared under the tenant's policy."""
        call = dataclasses.replace(FOLLOW_UP, last_resort=last_resort)
        return await preparer.prepare(
            body, raw, tenant, wire, windows, call=call, summarizer=summarizer
        )

    context = _completion_context(
        request,
        services,
        tenant,
        windows.upstream,
        windows.headers,
        None if held else prepare_again,
        refit,
        wire,
    )
    return await respond(request, await run_completion(context, prepared))


def _request_windows(
    request: web.Request, services: Services, tenant: Tenant, model: str
) -> RequestWindows:
    """The upstream serving `model`, the headers it gets, and what it said of its windows."""
    upstream = services.upstream_for(model, tenant.routes)
    return services.windows.for_request(upstream, _upstream_headers(request, tenant, upstream))


def _upstream_headers(request: web.Request, tenant: Tenant, upstream: Upstream) -> CIMultiDict[str]:
    """The client's headers for `upstream`, with the credentials the tenant sends there."""
    return forward_request_headers(
        request.headers,
        tenant.upstream_authorization(upstream.settings),
        api_key_header=upstream.settings.kind == "anthropic",
        pass_forwarding=upstream.settings.forwarded_headers == "pass",
    )


def _summarizer(
    request: web.Request, services: Services, tenant: Tenant, windows: RequestWindows,
    model: str,
) -> UpstreamSummarizer:
    """The request's summarizer: its own upstream and credentials by default; another upstream
    (a policy's `summarizer.upstream`) with the tenant's credentials for that one."""

    def headers_for(upstream: Upstream) -> CIMultiDict[str]:
        if upstream is windows.upstream:
            return CIMultiDict(windows.headers)
        authorization = tenant.upstream_authorization(upstream.settings)
        passing = upstream.settings.forwarded_headers == "pass"
        return forward_request_headers(request.headers, authorization, pass_forwarding=passing)

    return UpstreamSummarizer(windows.upstream, services.upstreams, headers_for, model)


def _completion_context(
    request: web.Request,
    services: Services,
    tenant: Tenant,
    upstream: Upstream,
    headers: CIMultiDict[str],
    prepare_again: PrepareAgain | None = None,
    refit: Refit | None = None,
    wire: ChatFormat = OPENAI_CHAT,
) -> CompletionContext:
    """What the completion needs of this request: upstream, credentials, scope, services."""
    return CompletionContext(
        upstream=upstream,
        headers=headers,
        scope=tenant.scope,
        store=services.started_store(),
        metrics=services.metrics,
        stats=request[STATS],
        request_id=request[REQUEST_ID],
        chat_format=wire,
        max_parsed_response_bytes=services.settings.server.max_parsed_response_bytes,
        search_worker=services.search_worker,
        prepare_again=prepare_again,
        calibration=services.calibration,
        refit=refit,
    )


def _note_prepared(request: web.Request, prepared: Prepared) -> None:
    stats = request[STATS]
    stats.manifest = prepared.manifest
    stats.policy = prepared.manifest.policy


async def prepare_dry_run(request: web.Request) -> web.Response:
    """The exact upstream body and the manifest; `?format=anthropic_messages` for a Messages
    body (default `openai_chat`)."""
    services = request.app[SERVICES]
    raw, body = await read_json_body(request)
    tenant: Tenant = request[TENANT].in_body_session(body)
    wire = _dry_run_format(request)
    windows = _request_windows(request, services, tenant, wire.model(body))
    summarizer = _summarizer(request, services, tenant, windows, wire.model(body))
    prepared = await services.started_preparer().prepare(
        body, raw, tenant, wire, windows, summarizer=summarizer
    )
    _note_prepared(request, prepared)
    large = len(raw) >= LARGE_BODY_BYTES
    answer = (
        await asyncio.to_thread(_dry_run_answer, prepared) if large else _dry_run_answer(prepared)
    )
    return web.Response(body=answer, content_type="application/json")


def _dry_run_format(request: web.Request) -> ChatFormat:
    """The body's format: `?format=` names one of `FORMATS` (a chat completion by default)."""
    name = request.query.get("format", OPENAI_CHAT.name)
    wire = FORMATS.get(name)
    if wire is None:
        known = ", ".join(sorted(FORMATS))
        raise ProxyError(
            ErrorCode.invalid_request, f"Unknown format {name!r} (known: {known})", param="format"
        )
    return wire


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
        answer, {}, request[REQUEST_ID], OPENAI_CHAT.relayed_error_event, encoded=True
    )
    return await respond(request, reply)


def _model_hint(request: web.Request, body: bytes | None) -> str:
    if not body or not request.content_type.endswith("json"):
        return ""
    try:
        return request_model(loads_object(body))
    except ProxyError:
        return ""


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def root(request: web.Request) -> web.Response:
    """`GET /` and `HEAD /`: what a provider's root answers (clients such as Claude Code probe
    it before their first request), without credentials."""
    return web.Response(text="ctxproxy: an LLM context proxy. It serves /v1/*.\n")


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format (no keys or key hashes in labels); needs a proxy key per
    `server.metrics_auth` (by default in auth mode 'keys', where labels name tenants)."""
    body = request.app[SERVICES].metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def readyz(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    store_ok = bool(await services.store.ping()) if services.store is not None else True
    policies_ok = services.policies is not None
    status = 200 if store_ok and policies_ok else 503
    body = {
        "status": "ready" if status == 200 else "not_ready",
        "store": store_ok,
        "policies": policies_ok,
    }
    return web.json_response(body, status=status)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/messages", messages)
    app.router.add_post("/v1/messages/count_tokens", count_tokens)
    app.router.add_post("/v1/responses", responses)
    app.router.add_post("/v1/context/prepare", prepare_dry_run)
    app.router.add_get("/v1/context/artifacts/{artifact_id}", read_artifact)
    app.router.add_get("/", root)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_route("*", "/v1/{tail:.*}", passthrough)
