"""One chat completion end to end: prepare -> upstream -> relay."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from proxy.auth import Tenant
from proxy.manifest import Prepared
from proxy.relay import relay
from proxy.services import Services
from proxy.upstream.openai_http import forward_request_headers


def request_model(body: dict[str, Any]) -> str:
    model = body.get("model")
    return model if isinstance(model, str) else ""


async def run_completion(
    request: web.Request, services: Services, prepared: Prepared, tenant: Tenant
) -> web.StreamResponse:
    """Send the prepared request upstream and relay the answer; refusals happened before this."""
    upstream = services.upstream_for(request_model(prepared.parsed))
    headers = forward_request_headers(
        request.headers, tenant.upstream_authorization(upstream.settings)
    )
    headers["Content-Type"] = "application/json"
    answer = await upstream.open("POST", "/chat/completions", headers=headers, body=prepared.body)
    return await relay(request, answer, prepared.headers(), upstream.name)
