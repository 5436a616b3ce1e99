"""One chat completion end to end: prepare -> upstream -> resolve synthetic calls -> relay.

Without synthetic tools in the prepared request the upstream answer is relayed byte for byte
(`proxy.http.relay`). With them, the proxy runs the read-tool loop itself: a round whose only tool
calls are synthetic is executed and the upstream asked again, up to the policy's `max_rounds`; the
client gets one ordinary answer with `usage` summed over the rounds and the synthetic calls removed.
Non-streaming answers carry `x-ctxproxy-synthetic-rounds` and `x-ctxproxy-artifact-reads`; streams
(`proxy.completion.stream`) cannot, and every request with synthetic tools logs one INFO line with
both counts instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import aiohttp
from aiohttp import web

from proxy.completion.rounds import SyntheticRounds, strip_synthetic_calls, synthetic_only
from proxy.completion.stream import stream_rounds
from proxy.engine.manifest import Prepared
from proxy.engine.preparer import request_model
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.sse import add_usage
from proxy.http.auth import Tenant
from proxy.http.relay import is_event_stream, relay
from proxy.http.services import STATS, Services
from proxy.jsonio import dumps, loads
from proxy.upstream.openai_http import (
    forward_request_headers,
    relay_response_headers,
    upstream_read_error,
)


async def run_completion(
    request: web.Request, services: Services, prepared: Prepared, tenant: Tenant
) -> web.StreamResponse:
    """Send the prepared request upstream and answer; refusals happened before this."""
    upstream = services.upstream_for(request_model(prepared.parsed))
    headers = forward_request_headers(
        request.headers, tenant.upstream_authorization(upstream.settings)
    )
    headers["Content-Type"] = "application/json"
    if prepared.synthetic is None:
        answer = await upstream.open(
            "POST",
            "/chat/completions",
            headers=headers,
            body=prepared.body,
            stats=request[STATS],
        )
        return await relay(request, answer, prepared.headers(), upstream.name)
    rounds = SyntheticRounds(
        request,
        upstream,
        headers,
        services.started_store(),
        tenant.scope,
        prepared.synthetic,
        prepared.parsed,
        services.metrics,
    )
    try:
        answer = await rounds.open(rounds.first_body(prepared.body))
        if (
            prepared.parsed.get("stream") is True
            and answer.status == 200
            and is_event_stream(answer)
        ):
            return await stream_rounds(rounds, answer, prepared.headers())
        return await complete_json(rounds, answer, prepared.headers())
    finally:
        rounds.log_outcome()


async def complete_json(
    rounds: SyntheticRounds, answer: aiohttp.ClientResponse, extra_headers: Mapping[str, str]
) -> web.StreamResponse:
    """The non-streaming loop; `answer` (the first round's response) is always closed."""
    usage: dict[str, Any] | None = None
    while True:
        if answer.status != 200:
            extra = {**extra_headers, **rounds.response_headers()}
            return await relay(rounds.request, answer, extra, rounds.upstream.name)
        raw = await _read_body(answer, rounds.upstream.name)
        payload = _parse_completion(raw, rounds.upstream.name)
        usage = add_usage(usage, payload.get("usage"))
        pending = synthetic_only(payload) if rounds.loop_allowed else None
        if pending is None:
            break
        await rounds.execute(*pending)
        answer = await rounds.open(rounds.next_body())
    headers = relay_response_headers(answer.headers)
    headers.update(extra_headers)
    headers.update(rounds.response_headers())
    if strip_synthetic_calls(payload) or rounds.rounds:
        if usage is not None:
            payload["usage"] = usage
        raw = dumps(payload)
    return web.Response(body=raw, status=200, headers=headers)


async def _read_body(answer: aiohttp.ClientResponse, name: str) -> bytes:
    try:
        return await answer.read()
    except (aiohttp.ClientError, TimeoutError, asyncio.IncompleteReadError) as exc:
        raise upstream_read_error(exc, name) from exc
    finally:
        answer.close()


def _parse_completion(raw: bytes, name: str) -> dict[str, Any]:
    try:
        payload = loads(raw)
    except ProxyError:
        payload = None
    if not isinstance(payload, dict):
        raise ProxyError(
            ErrorCode.upstream_invalid_response,
            f"Upstream {name!r} answered with something that is not a JSON completion",
        )
    return payload
