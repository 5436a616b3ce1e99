"""Runs the real ctxproxy app on a loopback port for end-to-end tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from shared_tokens import shared_catalog, shared_counters

from proxy.app import create_app
from proxy.http.server import EdgeRunner
from proxy.http.services import SERVICES, Services
from proxy.settings import Settings
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

REPO = Path(__file__).resolve().parents[2]


def make_settings(upstream_url: str, **overrides: Any) -> Settings:
    """Settings for a test: one upstream (the fake), memory store, the repo's policies."""
    data: dict[str, Any] = {
        "upstreams": [
            {
                "name": "fake",
                "base_url": upstream_url,
                # generous: a loaded machine must not turn a test's answer into a 504
                "timeouts": {"first_byte_s": 60, "idle_read_s": 60, "total_s": 120},
            }
        ],
        "policies_dir": str(REPO / "policies"),
        "store": {"secret": "test-secret"},
    }
    data.update(overrides)
    return Settings.model_validate(data)


@dataclass
class RunningProxy:
    runner: web.AppRunner
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def services(self) -> Services:
        return self.runner.app[SERVICES]

    async def stop(self) -> None:
        await self.runner.cleanup()


def shared_parts() -> tuple[TokenCounters, ModelCatalog]:
    """One loaded tokenizer and model map for every proxy a test run starts (as one process)."""
    return shared_counters(), shared_catalog()


async def start_proxy(
    settings: Settings,
    *,
    counters: TokenCounters | None = None,
    catalog: ModelCatalog | None = None,
    clock: Callable[[], float] = time.time,
) -> RunningProxy:
    """The app on a free loopback port; `counters`, `catalog`: instead of the run's shared ones;
    `clock`: the app's wall clock (when prompts went upstream)."""
    shared, shared_catalog = shared_parts()
    app = create_app(
        settings, counters=counters or shared, catalog=catalog or shared_catalog, clock=clock
    )
    runner = EdgeRunner(app, settings.server)  # the server `ctxproxy serve` runs
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return RunningProxy(runner, port)
