"""Request-record tests: a client of the records routes, and a wait for the records written
after each answer (the recorder writes them off the response path)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from proxy_harness import RunningProxy

WAIT_S = 30.0
KEYS = {
    "auth": {"mode": "keys", "operator_keys": ["sk-operator"]},
    "tenants": [
        {"name": "acme", "keys": ["sk-acme"], "policy": "small"},
        {"name": "globex", "keys": ["sk-globex"], "policy": "small"},
    ],
}
"""Two tenants and an operator key (the policy `small` comes from `SyntheticProxies`)."""


async def written(proxy: RunningProxy) -> None:
    """Until every record handed to the recorder so far is written (or dropped)."""
    recorder = proxy.services.recorder
    if recorder is None:  # records are off
        return
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while recorder.pending:
        assert asyncio.get_running_loop().time() < deadline, "records still pending"
        await asyncio.sleep(0.01)


async def get(proxy: RunningProxy, path: str, key: str = "sk-acme") -> tuple[int, Any]:
    """`GET /v1/context/<path>` with `key` once the pending records are written."""
    await written(proxy)
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{proxy.base_url}/context/{path}", headers=headers) as response,
    ):
        return response.status, await response.json(content_type=None)


async def post(
    proxy: RunningProxy, route: str, body: dict[str, Any], key: str = "sk-acme", **headers: str
) -> tuple[int, str, bytes]:
    """A completion: its status, request id and body."""
    sent = {"Authorization": f"Bearer {key}", **headers}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.url}{route}", json=body, headers=sent) as response,
    ):
        raw = await response.read()
        return response.status, response.headers["x-ctxproxy-request-id"], raw


async def listed(proxy: RunningProxy, query: str = "", key: str = "sk-acme") -> list[str]:
    status, page = await get(proxy, f"requests?{query}", key)
    assert status == 200, page
    return [item["request_id"] for item in page["data"]]
