"""`proxy.http.middleware`: request ids, tenant resolution and errors as OpenAI envelopes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families
from shared_tokens import shared_catalog, shared_counters

from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.errors import ErrorCode, ProxyError, RefusalReason
from proxy.http.auth import TenantResolver
from proxy.http.middleware import REQUEST_ID_HEADER, edge_middleware
from proxy.http.services import REQUEST_ID, SERVICES, TENANT, Services
from proxy.jsonio import loads
from proxy.settings import Settings

KEY = "sk-proxy-acme"
SECRET_TEXT = "boom: sk-live-secret at /srv/internal/path.py"


def keys_settings() -> Settings:
    return Settings.model_validate(
        {
            "upstreams": [{"name": "u", "base_url": "http://127.0.0.1:9/v1"}],
            "auth": {"mode": "keys"},
            "tenants": [{"name": "acme", "keys": [KEY], "policy": "small"}],
        }
    )


def seen(request: web.Request) -> dict[str, Any]:
    tenant = request.get(TENANT)
    return {
        "request_id": request[REQUEST_ID],
        "tenant": None if tenant is None else [tenant.name, tenant.policy, tenant.scope],
    }


async def echo(request: web.Request) -> web.Response:
    return web.json_response(seen(request))


async def refuse(request: web.Request) -> web.Response:
    raise ProxyError(
        ErrorCode.context_length_exceeded,
        "too long",
        param="messages",
        details={"reason": "policy_steps_exhausted", "tokens": 9},
        reason=RefusalReason.policy_steps_exhausted,
    )


async def crash(request: web.Request) -> web.Response:
    raise RuntimeError(SECRET_TEXT)


async def big(request: web.Request) -> web.Response:
    return web.Response(body=await request.read())


async def redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound("/healthz")


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:
    settings = keys_settings()
    app = web.Application(middlewares=[edge_middleware], client_max_size=1024)
    app[SERVICES] = Services(
        settings=settings,
        tenants=TenantResolver(settings),
        counters=shared_counters(),
        catalog=shared_catalog(),
    )
    for path in ("/healthz", "/readyz", "/metrics", "/v1/echo"):
        app.router.add_get(path, echo)
    app.router.add_post("/v1/chat/completions", refuse)
    app.router.add_post("/v1/context/prepare", refuse)
    app.router.add_get("/v1/crash", crash)
    app.router.add_post("/v1/big", big)
    app.router.add_get("/v1/redirect", redirect)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


AUTH = {"Authorization": f"Bearer {KEY}"}


async def envelope(response: Any, status: int, code: ErrorCode) -> dict[str, Any]:
    assert response.status == status
    assert response.content_type == "application/json"
    payload = loads(await response.read())
    error = payload["error"]
    assert error["code"] == code.name and error["type"] == code.error_type
    request_id = response.headers[REQUEST_ID_HEADER]
    assert len(request_id) == 32 and int(request_id, 16) >= 0
    assert error["ctxproxy"]["request_id"] == request_id
    return dict(error)


async def test_success_carries_the_request_id_and_the_tenant(client: TestClient) -> None:
    ids = set()
    for _ in range(2):
        async with client.get("/v1/echo", headers=AUTH) as response:
            assert response.status == 200
            body = await response.json()
            assert body["request_id"] == response.headers[REQUEST_ID_HEADER]
            assert body["tenant"] == ["acme", "small", "acme"]
            ids.add(body["request_id"])
    assert len(ids) == 2


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_open_routes_skip_auth(client: TestClient, path: str) -> None:
    async with client.get(path) as response:
        assert response.status == 200
        body = await response.json()
        assert body["tenant"] is None
        assert body["request_id"] == response.headers[REQUEST_ID_HEADER]


async def test_metrics_need_a_key_in_keys_mode_by_default(client: TestClient) -> None:
    async with client.get("/metrics") as response:
        await envelope(response, 401, ErrorCode.invalid_api_key)
    async with client.get("/metrics", headers=AUTH) as response:
        assert response.status == 200
        assert (await response.json())["tenant"] == ["acme", "small", "acme"]


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer sk-wrong"}, {"Authorization": KEY}]
)
async def test_other_routes_need_a_key(client: TestClient, headers: dict[str, str]) -> None:
    async with client.get("/v1/echo", headers=headers) as response:
        error = await envelope(response, 401, ErrorCode.invalid_api_key)
    assert "sk-wrong" not in error["message"] and KEY not in error["message"]


async def test_auth_comes_before_routing(client: TestClient) -> None:
    # an unknown route without a key is refused as unauthenticated, not described as missing
    async with client.get("/v1/nope") as response:
        await envelope(response, 401, ErrorCode.invalid_api_key)
    async with client.get("/healthz/") as response:
        await envelope(response, 401, ErrorCode.invalid_api_key)


async def test_proxy_error_becomes_its_envelope(client: TestClient) -> None:
    async with client.post("/v1/context/prepare", headers=AUTH) as response:
        error = await envelope(response, 400, ErrorCode.context_length_exceeded)
    assert error["message"] == "too long" and error["param"] == "messages"
    assert error["ctxproxy"] == {"reason": "policy_steps_exhausted", "tokens": 9} | {
        "request_id": error["ctxproxy"]["request_id"]
    }


def refusals(client: TestClient) -> dict[str, float]:
    text = client.app[SERVICES].metrics.render().decode()
    return {
        s.labels["reason"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "ctxproxy_refusals_total"
    }


async def test_refusals_are_counted_for_chat_completions_only(client: TestClient) -> None:
    async with client.post("/v1/context/prepare", headers=AUTH) as response:
        assert response.status == 400
    assert refusals(client).get("policy_steps_exhausted", 0) == 0
    async with client.post("/v1/chat/completions", headers=AUTH) as response:
        await envelope(response, 400, ErrorCode.context_length_exceeded)
    assert refusals(client)["policy_steps_exhausted"] == 1


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/nope", 404, ErrorCode.not_found),
        ("GET", "/v1/chat/completions", 405, ErrorCode.method_not_allowed),
        ("DELETE", "/v1/echo", 405, ErrorCode.method_not_allowed),
    ],
)
async def test_aiohttp_http_errors_become_typed_envelopes(
    client: TestClient, method: str, path: str, status: int, code: ErrorCode
) -> None:
    async with client.request(method, path, headers=AUTH) as response:
        error = await envelope(response, status, code)
    assert error["param"] is None


async def test_oversized_body_is_413(client: TestClient) -> None:
    async with client.post("/v1/big", data=b"x" * 512, headers=AUTH) as response:
        assert response.status == 200 and len(await response.read()) == 512
    async with client.post("/v1/big", data=b"x" * 4096, headers=AUTH) as response:
        error = await envelope(response, 413, ErrorCode.request_too_large)
    assert error["message"] == "Request body is too large"


async def test_redirects_are_not_errors(client: TestClient) -> None:
    async with client.get("/v1/redirect", headers=AUTH, allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == "/healthz"


async def test_unexpected_exception_is_500_without_its_text(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="ctxproxy.http"):
        async with client.get("/v1/crash", headers=AUTH) as response:
            raw = await response.read()
            error = await envelope(response, 500, ErrorCode.internal_error)
    assert error["message"] == "Internal proxy error"
    assert b"sk-live-secret" not in raw and b"RuntimeError" not in raw and b"srv" not in raw
    logged = [r for r in caplog.records if r.getMessage() == "unhandled error"]
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert logged[0].request_id == error["ctxproxy"]["request_id"]  # type: ignore[attr-defined]


# -- the store lease ------------------------------------------------------------------------------


async def test_a_request_pins_what_it_stores_until_it_ends() -> None:
    """The handler runs inside a store lease: an artifact over the memory budget stays while its
    request runs (its read tools may still need it) and goes when the request ends."""
    settings = keys_settings()
    store = MemoryStore(b"secret", max_bytes=10)
    content = "x" * 100
    aid = store.artifact_id("acme", content)

    async def stores(request: web.Request) -> web.Response:
        confirmed = await store.put_many(
            "acme", {aid: NewArtifact(content, "tool_result")}, ttl_seconds=60, max_per_scope=9
        )
        other = store.artifact_id("acme", "y" * 100)
        await store.put_many(
            "acme", {other: NewArtifact("y" * 100, "tool_result")}, ttl_seconds=60, max_per_scope=9
        )  # over budget: evicts if it can
        return web.json_response(
            {"confirmed": aid in confirmed, "kept": await store.get("acme", aid) is not None}
        )

    app = web.Application(middlewares=[edge_middleware])
    app[SERVICES] = Services(
        settings=settings,
        tenants=TenantResolver(settings),
        counters=shared_counters(),
        catalog=shared_catalog(),
        store=store,
    )
    app.router.add_post("/v1/store", stores)
    async with TestClient(TestServer(app)) as test_client:
        response = await test_client.post("/v1/store", headers=AUTH)
        assert response.status == 200
        assert await response.json() == {"confirmed": True, "kept": True}
    assert await store.get("acme", aid) is None  # the lease ended: the budget holds again
