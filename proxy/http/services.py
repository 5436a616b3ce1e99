"""The dependencies of one app, assembled once in app.py and reached through one typed key."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiohttp import web

from proxy.http.auth import Tenant, TenantResolver
from proxy.metrics import Metrics
from proxy.settings import RouteSettings, Settings
from proxy.stats import RequestStats
from proxy.tokens.calibration import CountCalibration
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters
from proxy.upstream.windows import ModelWindows

if TYPE_CHECKING:
    from proxy.artifacts.store import ArtifactStore
    from proxy.completion.driver import CompletionDriver
    from proxy.engine.preparer import Preparer
    from proxy.policy.store import PolicyStore
    from proxy.records.recorder import Recorder
    from proxy.synthetic.base import SearchWorker
    from proxy.upstream.base import Upstream


class NotStarted(RuntimeError):
    """A service was used before the app's start-up built it."""


@dataclass
class Services:
    """Built in `create_app`; the store, policies and preparer are filled in at start-up."""

    settings: Settings
    tenants: TenantResolver
    counters: TokenCounters
    catalog: ModelCatalog
    metrics: Metrics = field(default_factory=Metrics)
    windows: ModelWindows = field(default_factory=ModelWindows)
    """The context windows learned from the upstreams (per upstream and model, bounded)."""
    calibration: CountCalibration = field(default_factory=CountCalibration)
    """The count ratio per model (the upstream's `usage` over the proxy's counts)."""
    clock: Callable[[], float] = time.time
    """Wall-clock seconds (`engine.cache_warmth`: when prompts went upstream)."""
    upstreams: dict[str, Upstream] = field(default_factory=dict)
    store: ArtifactStore | None = None
    search_worker: SearchWorker | None = None
    policies: PolicyStore | None = None
    preparer: Preparer | None = None
    driver: CompletionDriver | None = None
    recorder: Recorder | None = None
    """Keeps each completion's record (None: records are off, or not started)."""

    def started_store(self) -> ArtifactStore:
        if self.store is None:
            raise NotStarted("artifact store")
        return self.store

    def started_preparer(self) -> Preparer:
        if self.preparer is None:
            raise NotStarted("preparer")
        return self.preparer

    def started_driver(self) -> CompletionDriver:
        if self.driver is None:
            raise NotStarted("completion driver")
        return self.driver

    def upstream_for(self, model: str, tenant_routes: Sequence[RouteSettings] = ()) -> Upstream:
        return self.upstreams[self.settings.upstream_for(model, tenant_routes).name]


SERVICES: web.AppKey[Services] = web.AppKey("services", Services)
REQUEST_ID: web.RequestKey[str] = web.RequestKey("request_id", str)
TENANT: web.RequestKey[Tenant] = web.RequestKey("tenant", Tenant)
STATS: web.RequestKey[RequestStats] = web.RequestKey("stats", RequestStats)
