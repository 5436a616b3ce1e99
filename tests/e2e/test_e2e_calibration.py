"""Count calibration through the real server: an upstream that reports inflated `usage` for one
tenant shrinks that tenant's allowance only, on one proxy and on two replicas sharing Redis."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from fakes import FakeUpstream, Recorded, Reply, completion, make_usage
from fakes.defaults import default_for
from proxy_harness import RunningProxy, make_settings, start_proxy
from shared_tokens import counter_for

CHAT = "/v1/chat/completions"
POLICY = "extends: default\nbudget: {context_window: 8000, reserved_output: 500}\n"
"""allowance = 8000 - 500 - 160 = 7,340 tokens; a prompt is refused past 8000 - 256 - 160."""
KEYS = {"poisoner": "sk-proxy-poisoner", "honest": "sk-proxy-honest"}
UPSTREAM_KEYS = {"poisoner": "sk-up-poisoner", "honest": "sk-up-honest"}


def inflating(record: Recorded) -> Reply:
    """The upstream's answer: usage 3x the prompt's count for the poisoner's key, else exact."""
    if record.path != CHAT:
        return default_for(record)
    tokens = counter_for("gpt-4o").count_request(record.json())
    poisoned = record.headers.get("Authorization") == f"Bearer {UPSTREAM_KEYS['poisoner']}"
    return completion("ok", usage=make_usage(tokens * 3 if poisoned else tokens, 1))


@pytest.fixture
async def upstream() -> AsyncIterator[FakeUpstream]:
    async with FakeUpstream(default=inflating) as fake:
        yield fake


def settings(upstream: FakeUpstream, tmp_path: Path, **overrides: Any) -> Any:
    (tmp_path / "calib.yaml").write_text(POLICY)
    tenants = [
        {"name": n, "keys": [KEYS[n]], "policy": "calib", "upstream_key": UPSTREAM_KEYS[n]}
        for n in KEYS
    ]
    return make_settings(
        upstream.base_url,
        auth={"mode": "keys"},
        tenants=tenants,
        policies_dir=str(tmp_path),
        **overrides,
    )


def prompt(tokens: int) -> list[dict[str, Any]]:
    """One user message; the gpt-4o request counts about `tokens` tokens."""
    return [{"role": "user", "content": "lorem " * (tokens - 8)}]


async def manifest_of(proxy: RunningProxy, tenant: str, tokens: int = 600) -> dict[str, Any]:
    body = {"model": "gpt-4o", "messages": prompt(tokens)}
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.base_url}/context/prepare", json=body, headers=headers) as response,
    ):
        assert response.status == 200
        manifest: dict[str, Any] = (await response.json())["manifest"]
        return manifest


async def ask(proxy: RunningProxy, tenant: str, tokens: int) -> str | None:
    """A completion of about `tokens` prompt tokens; its answer, or the refusal's code."""
    async with openai.AsyncOpenAI(
        base_url=proxy.base_url, api_key=KEYS[tenant], max_retries=0
    ) as sdk:
        try:
            reply = await sdk.chat.completions.create(model="gpt-4o", messages=prompt(tokens))  # type: ignore[arg-type]
        except openai.BadRequestError as refused:
            return refused.code
    return reply.choices[0].message.content


async def test_inflated_usage_for_one_tenant_leaves_anothers_allowance_and_answer(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    proxy = await start_proxy(settings(upstream, tmp_path))
    try:
        before = await manifest_of(proxy, "honest")
        assert (before["allowance"], before["count_ratio"]) == (7340, 1.0)
        for _ in range(4):  # the poisoner's upstream reports ~3x the proxy's count
            assert await ask(proxy, "poisoner", 1000) == "ok"
        honest = await manifest_of(proxy, "honest")
        assert (honest["allowance"], honest["count_ratio"]) == (7340, 1.0)
        assert honest["count_ratio_source"] == "none"
        assert await ask(proxy, "honest", 4845) == "ok"  # not context_length_exceeded
        poisoner = await manifest_of(proxy, "poisoner")  # its own allowance, and only its own
        assert (poisoner["count_ratio"], poisoner["count_ratio_source"]) == (1.4, "own")
        assert poisoner["allowance"] == int(7340 / 1.4)
        metrics = (await scrape(proxy)).splitlines()
        for line in (
            'ctxproxy_count_ratio{model="gpt-4o",upstream="fake"} 1.0',  # nothing agreed
            'ctxproxy_count_ratio_contributors{model="gpt-4o",upstream="fake"} 1.0',
            'ctxproxy_count_ratio_samples_total{model="gpt-4o",upstream="fake"} 5.0',
            'ctxproxy_count_ratio_applied_total{source="none"} 4.0',
            'ctxproxy_count_ratio_applied_total{source="own"} 1.0',  # the poisoner's 4th
        ):
            assert line in metrics
        ratio_lines = [x for x in metrics if x.startswith("ctxproxy_count_ratio")]
        labels = {name for x in ratio_lines for name in re.findall(r'(\w+)="', x)}
        assert labels == {"upstream", "model", "source"}  # never a tenant, scope or key
    finally:
        await proxy.stop()


async def scrape(proxy: RunningProxy) -> str:
    headers = {"Authorization": f"Bearer {KEYS['honest']}"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{proxy.url}/metrics", headers=headers) as response,
    ):
        return await response.text()


async def test_replicas_keep_one_tenants_inflated_usage_to_that_tenant(
    upstream: FakeUpstream, tmp_path: Path, redis_store_settings: dict[str, Any]
) -> None:
    store = {**redis_store_settings, "calibration_sync_s": 0.05}
    serving = await start_proxy(settings(upstream, tmp_path, store=store))
    other = await start_proxy(settings(upstream, tmp_path, store=store))
    try:
        assert (await manifest_of(other, "honest"))["allowance"] == 7340
        assert (await manifest_of(other, "poisoner"))["allowance"] == 7340
        for _ in range(4):
            assert await ask(serving, "poisoner", 1000) == "ok"
        for _ in range(600):  # a few sync intervals of both replicas (30 s: a hang)
            poisoner = await manifest_of(other, "poisoner")
            if poisoner["count_ratio"] == 1.4:  # its 4 samples, merged
                break
            await asyncio.sleep(0.05)
        for proxy in (other, serving):  # nobody else's allowance changed, on either replica
            honest = await manifest_of(proxy, "honest")
            assert (honest["allowance"], honest["count_ratio"]) == (7340, 1.0)
        assert await ask(other, "honest", 4845) == "ok"
        # The other replica did learn the poisoner's own ratio (the sync ran).
        assert (poisoner["count_ratio"], poisoner["count_ratio_source"]) == (1.4, "own")
        assert len(upstream.requests(CHAT)) == 5
    finally:
        await serving.stop()
        await other.stop()
