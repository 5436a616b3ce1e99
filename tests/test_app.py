"""`proxy.app.create_app`: start-up checks and the wiring of shared parts."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from lost_cancel import LosesOneCancellation
from proxy_harness import make_settings, shared_parts, start_proxy
from shared_redis import require_shared_redis, unique_prefix

from proxy import app as app_module
from proxy.app import create_app
from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import MemoryStore
from proxy.http.services import SERVICES
from proxy.settings import Settings
from proxy.synthetic.base import SearchWorker
from proxy.tokens.calibration_rule import CalibrationKey
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

UPSTREAM = "http://127.0.0.1:9/v1"


def with_tenants(*policies: str, **extra: Any) -> Settings:
    tenants = [{"name": f"t{i}", "policy": p} for i, p in enumerate(policies)]
    return make_settings(UPSTREAM, tenants=tenants, **extra)


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ({"source": "/etc/ctxproxy/config.yaml"}, "/etc/ctxproxy/config.yaml"),
        ({}, "<embedded default>"),
    ],
)
async def test_unknown_tenant_policy_fails_start_up_naming_the_source(
    source: dict[str, str], shown: str
) -> None:
    settings = with_tenants("default", "nope", "ghost", "nope", **source)
    counters, catalog = shared_parts()
    runner = web.AppRunner(create_app(settings, counters=counters, catalog=catalog))
    try:
        with pytest.raises(ValueError) as caught:
            await runner.setup()
    finally:
        await runner.cleanup()
    assert str(caught.value) == f"{shown}: tenants: unknown policy ghost, nope"
    assert runner.app[SERVICES].preparer is None
    assert runner.app[SERVICES].policies is None


async def test_known_policies_start_and_build_every_service() -> None:
    running = await start_proxy(with_tenants("default", "strict"))
    try:
        services = running.services
        assert set(services.upstreams) == {"fake"}
        assert services.upstreams["fake"].url("/models") == UPSTREAM + "/models"
        assert isinstance(services.store, MemoryStore)
        assert services.policies is not None and "strict" in services.policies
        assert services.preparer is not None
        assert isinstance(services.search_worker, SearchWorker)
    finally:
        await running.stop()


async def test_the_search_worker_is_closed_with_the_app() -> None:
    running = await start_proxy(make_settings(UPSTREAM))
    worker = running.services.search_worker
    assert worker is not None
    await running.stop()
    with pytest.raises(RuntimeError):  # shut down: it takes no more work
        await worker.run(dict)


async def test_one_shared_token_counter_set_serves_every_app() -> None:
    counters, catalog = shared_parts()
    first = await start_proxy(make_settings(UPSTREAM))
    second = await start_proxy(make_settings(UPSTREAM))
    try:
        for running in (first, second):
            services = running.services
            assert services.counters is counters and services.catalog is catalog
            # the preparer counts with the shared set, not with a copy of its own
            assert services.preparer is not None
            assert services.preparer._counters is counters
            assert services.preparer._catalog is catalog
    finally:
        await first.stop()
        await second.stop()


def test_without_shared_parts_each_app_gets_its_own() -> None:
    settings = make_settings(UPSTREAM)
    a, b = create_app(settings)[SERVICES], create_app(settings)[SERVICES]
    assert isinstance(a.counters, TokenCounters) and isinstance(a.catalog, ModelCatalog)
    assert a.counters is not b.counters and a.catalog is not b.catalog
    assert a.metrics is not b.metrics


async def test_a_failed_start_up_closes_what_already_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # aiohttp runs no cleanup when its start-up fails: the app must close what it opened
    def broken(*_: object) -> None:
        raise RuntimeError("cannot check the policies")

    monkeypatch.setattr(app_module, "_check_tenant_policies", broken)
    counters, catalog = shared_parts()
    app = create_app(make_settings(UPSTREAM), counters=counters, catalog=catalog)
    runner = web.AppRunner(app)
    with pytest.raises(RuntimeError, match="cannot check the policies"):
        await runner.setup()
    services = app[SERVICES]
    [upstream] = services.upstreams.values()
    assert upstream._session.closed
    assert services.store is not None and services.preparer is None


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_start_up_loads_no_tokenizer_and_no_model_map(kind: str) -> None:
    """Each encoding is loaded when a request first needs it (a deployment that only sees one
    model family loads one; o200k_base alone is ~45 MB), and the model map with the first
    request: a process at rest holds neither."""
    upstreams = [{"name": "u", "kind": kind, "base_url": UPSTREAM}]
    counters, catalog = TokenCounters(), ModelCatalog()
    settings = make_settings(UPSTREAM, upstreams=upstreams)
    proxy = await start_proxy(settings, counters=counters, catalog=catalog)
    try:
        assert not counters.loaded("gpt-4o")
        assert not counters.loaded("claude-sonnet-4-5")
        assert not catalog.loaded()
    finally:
        await proxy.stop()


async def test_shutdown_ends_the_calibration_sync_after_its_store_lost_a_cancellation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sync's round trip outlives the grace period, the cancel that follows is lost (as in
    Python 3.11's `wait_for`); shutdown still ends the loop instead of waiting for it forever."""
    shared = LosesOneCancellation()
    monkeypatch.setattr(RedisStore, "count_ratios", lambda _store: shared)
    monkeypatch.setattr(app_module, "_STOP_GRACE_S", 0.05)
    store = {
        "kind": "redis",
        "url": require_shared_redis(),
        "key_prefix": unique_prefix(),  # nothing is written: the shared ratios are the double
        "secret": "test-secret",
        "calibration_sync_s": 0.01,
    }
    proxy = await start_proxy(make_settings(UPSTREAM, store=store))
    proxy.services.calibration.applied(CalibrationKey("fake", "gpt-4o"), "")  # a key to sync
    async with asyncio.timeout(30):
        await shared.waiting.wait()
        await proxy.stop()  # a hang fails here instead of hanging the run
    assert shared.lost_cancellations == 1
    assert shared.exchanges == 2  # the stuck one, then the last one


LAZY_START = """
import asyncio, json, sys

import aiohttp
from fakes import FakeUpstream
from proxy_harness import make_settings, start_proxy

from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

HEAVY = ("litellm", "tiktoken", "tokenizers", "redis")


async def main() -> None:
    async with FakeUpstream() as upstream:
        counters, catalog = TokenCounters(), ModelCatalog()
        proxy = await start_proxy(
            make_settings(upstream.base_url), counters=counters, catalog=catalog
        )
        at_rest = [name for name in HEAVY if name in sys.modules]
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}
        async with aiohttp.ClientSession() as client:
            async with client.post(
                proxy.base_url + "/chat/completions",
                json=body,
                headers={"Authorization": "Bearer sk-test"},
            ) as answer:
                status, tokens = answer.status, answer.headers.get("x-ctxproxy-tokens-before")
        loaded = {
            model: counters.loaded(model)
            for model in ("gpt-4o", "gpt-4", "claude-sonnet-4-5", "llama-3-70b")
        }
        served = [name for name in HEAVY if name in sys.modules]
        await proxy.stop()
    print(json.dumps({"at_rest": at_rest, "served": served, "status": status,
                      "tokens": tokens, "loaded": loaded, "map": catalog.loaded()}))


asyncio.run(main())
"""


def test_a_fresh_process_loads_only_what_its_first_openai_request_needs() -> None:
    """A fresh process (its own interpreter: nothing imported by other tests) starts without
    litellm, a tokenizer library or redis-py, and one gpt-4o request loads tiktoken's o200k_base
    and the model map, and nothing else: no other encoding, no HF `tokenizers`, no litellm."""
    support = Path(__file__).parent / "support"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(support), str(support.parents[1])])}
    ran = subprocess.run(
        [sys.executable, "-c", LAZY_START], capture_output=True, text=True, env=env, timeout=240
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    assert seen["status"] == 200 and int(seen["tokens"]) > 0
    assert seen["at_rest"] == []
    assert seen["served"] == ["tiktoken"]
    assert seen["loaded"] == {
        "gpt-4o": True,  # o200k_base
        "gpt-4": False,  # cl100k_base
        "claude-sonnet-4-5": False,  # HF tokenizers
        "llama-3-70b": False,  # the estimate, which loads nothing, is not built either
    }
    assert seen["map"] is True
