"""`create_app(settings)`: the one place where dependencies are assembled."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import aiohttp
from aiohttp import web

from proxy.artifacts.budgets import WriteBudget, WriteBudgets
from proxy.artifacts.records import MemoryRecords, RecordStore
from proxy.completion.driver import CompletionDriver
from proxy.engine.preparer import Preparer
from proxy.http.auth import TenantResolver
from proxy.http.handlers import add_routes
from proxy.http.middleware import edge_middleware
from proxy.http.services import SERVICES, Services
from proxy.metrics import Metrics
from proxy.policy.store import PolicyStore
from proxy.records.recorder import Recorder
from proxy.settings import Settings, WriteBudgetSettings
from proxy.synthetic.base import SearchWorker
from proxy.tokens.calibration import CountCalibration
from proxy.tokens.calibration_sync import CalibrationSync
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters
from proxy.tokens.prices import PriceTable
from proxy.upstream import UPSTREAM_KINDS
from proxy.upstream.base import Upstream
from proxy.upstream.windows import ModelWindows

log = logging.getLogger("ctxproxy")


def create_app(
    settings: Settings,
    *,
    counters: TokenCounters | None = None,
    catalog: ModelCatalog | None = None,
    clock: Callable[[], float] = time.time,
) -> web.Application:
    """The app. `counters` and `catalog` may be shared by apps in one process (tests do);
    `clock` (wall-clock seconds) says when a prompt went upstream and how long ago."""
    app = web.Application(
        middlewares=[edge_middleware],
        client_max_size=settings.server.max_body_bytes,
    )
    services = Services(
        settings=settings,
        tenants=TenantResolver(settings),
        counters=counters or TokenCounters(),
        catalog=catalog or ModelCatalog(),
        metrics=Metrics(),
        windows=ModelWindows(),
        calibration=CountCalibration(),
        clock=clock,
    )
    services.metrics.watch_calibration(services.calibration.snapshot)
    app[SERVICES] = services
    app.cleanup_ctx.append(_all_or_nothing)
    add_routes(app)
    return app


async def _all_or_nothing(app: web.Application) -> AsyncIterator[None]:
    """The start-up parts in order, closed in reverse. If one fails to start, those already
    started are closed before the error propagates: aiohttp runs no cleanup after a failed
    start-up (an open client session would be left behind)."""
    started: list[contextlib.AbstractAsyncContextManager[None]] = []
    try:
        for part in (
            _upstream_session,
            _artifact_store,
            _request_records,
            _calibration_sync,
            _search_worker,
            _policies,
        ):
            context = contextlib.asynccontextmanager(part)(app)
            await context.__aenter__()
            started.append(context)
        # What start-up loaded (model map, tokenizers, policies, the process's imports) lives as
        # long as the process: out of the collector's sight, a full collection triggered while a
        # large request is prepared no longer walks it all with the GIL held.
        gc.freeze()
    except BaseException:
        with contextlib.suppress(Exception):  # the start-up error is the one to report
            await _close(started)
        raise
    try:
        yield
    finally:
        await _close(started)


async def _close(started: list[contextlib.AbstractAsyncContextManager[None]]) -> None:
    """Like aiohttp's own cleanup: every part is closed, the first error is raised after."""
    errors: list[Exception] = []
    for context in reversed(started):
        try:
            await context.__aexit__(None, None, None)
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


async def _upstream_session(app: web.Application) -> AsyncIterator[None]:
    services = app[SERVICES]
    limit = sum(u.max_connections for u in services.settings.upstreams)
    connector = aiohttp.TCPConnector(limit=limit, ttl_dns_cache=300)
    # answers are decoded in bounded steps by the upstream module, never whole by aiohttp
    session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
    services.upstreams = {
        u.name: UPSTREAM_KINDS[u.kind](u, session) for u in services.settings.upstreams
    }
    yield
    await session.close()


def _store_secret(settings: Settings) -> bytes:
    if settings.store.secret:
        return settings.store.secret.encode()
    if settings.store.kind == "redis":
        log.warning(
            "store.secret is empty: each process draws its own, so after a restart and on every "
            "other replica the same content gets another artifact id and the proxy's earlier "
            "notices are no longer recognised as its own (prompts change bytes, caches miss); "
            "set store.secret to one value for all replicas"
        )
    return secrets.token_bytes(32)


async def _search_worker(app: web.Application) -> AsyncIterator[None]:
    services = app[SERVICES]
    services.search_worker = worker = SearchWorker()
    yield
    worker.close()


def write_budgets(settings: Settings) -> WriteBudgets:
    """Each tenant's write budget, by the scope its budgets are kept under (`budget_owner`): in
    keys mode the tenant's name; in passthrough mode each credential's scope, all with the
    passthrough tenant's budget."""

    def budget(own: WriteBudgetSettings) -> WriteBudget:
        return WriteBudget(own.bytes_per_minute, own.max_live_bytes)

    if settings.auth.mode == "passthrough":
        return WriteBudgets(budget(settings.write_budget_for(settings.auth.passthrough_tenant)))
    tenants = {
        t.name: budget(settings.write_budget_for(t.name))
        for t in settings.tenants
        if t.write_budget is not None
    }
    return WriteBudgets(budget(settings.store.write_budget), tenants)


async def _artifact_store(app: web.Application) -> AsyncIterator[None]:
    from proxy.artifacts.redis_store import RedisStore
    from proxy.artifacts.store import MemoryStore

    services = app[SERVICES]
    store_settings = services.settings.store
    secret = _store_secret(services.settings)
    budgets = write_budgets(services.settings)
    if store_settings.kind == "redis":
        redis_store = RedisStore(
            store_settings.url,
            secret,
            key_prefix=store_settings.key_prefix,
            pool_size=store_settings.pool_size,
            pool_timeout=store_settings.pool_timeout_s,
            socket_timeout=store_settings.socket_timeout_s,
            budgets=budgets,
        )
        await redis_store.check_eviction_policy()
        services.store = redis_store
        refusals = redis_store.refused_writes
    else:
        memory = MemoryStore(secret, max_bytes=store_settings.memory_max_bytes, budgets=budgets)
        services.store, refusals = memory, memory.refused_writes
    store = services.store
    services.metrics.watch_store(lambda: int(getattr(store, "failed_operations", 0)))
    services.metrics.watch_write_budgets(refusals.snapshot)
    yield
    await services.store.close()


async def _request_records(app: web.Application) -> AsyncIterator[None]:
    """The recorder of completions' records, on the artifact store's Redis or in memory."""
    services = app[SERVICES]
    settings = services.settings.server.records
    if not settings.enabled:
        yield
        return
    ttl, most = settings.ttl_seconds, settings.max_records
    on_redis = getattr(services.started_store(), "request_records", None)
    store: RecordStore = (
        MemoryRecords(ttl_seconds=ttl, max_records=most)
        if on_redis is None
        else on_redis(ttl_seconds=ttl, max_records=most)
    )
    metrics = services.metrics
    services.recorder = recorder = Recorder(
        store,
        max_pending=settings.max_pending,
        dropped=metrics.record_dropped,
        linger_s=0.0 if on_redis is None else settings.flush_s,
    )
    recorder.start()
    yield
    services.recorder = None
    await recorder.stop(_STOP_GRACE_S)


async def _calibration_sync(app: web.Application) -> AsyncIterator[None]:
    """Replicas on a shared store share their count ratios (one process needs no sync)."""
    services = app[SERVICES]
    count_ratios = getattr(services.started_store(), "count_ratios", None)
    if count_ratios is None:
        yield
        return
    interval = services.settings.store.calibration_sync_s
    sync = CalibrationSync(services.calibration, count_ratios(), interval_s=interval)
    task = asyncio.create_task(sync.run(), name="count calibration sync")
    yield
    sync.stop()
    await _ended(task, _STOP_GRACE_S)


_STOP_GRACE_S = 10.0
"""How long a background loop may take to finish its last round at shutdown (a Redis round trip
is bounded by the store's pool and socket timeouts, a few seconds)."""


async def _ended(task: asyncio.Task[None], grace_s: float) -> None:
    """Wait for a stopped background `task`; past `grace_s`, cancel it and wait as long again.
    Never waits without a deadline: shutdown must not hang on a loop that does not end."""
    for attempt in range(2):
        done, _ = await asyncio.wait({task}, timeout=grace_s)
        if done:
            if not task.cancelled() and task.exception() is not None:
                log.error("background task %s failed", task.get_name(), exc_info=task.exception())
            return
        if attempt == 0:
            task.cancel()
    log.error("background task %s did not end at shutdown; left behind", task.get_name())


async def _policies(app: web.Application) -> AsyncIterator[None]:
    services = app[SERVICES]
    directory = services.settings.policies_dir
    policies = PolicyStore.load(None if directory is None else Path(directory))
    _check_tenant_policies(services.settings, policies)
    counters, catalog = services.counters, services.catalog
    # Load the encodings the upstreams speak and the model map now, not on the first request:
    # building a tokenizer holds the GIL (~0.1 s for Claude's), in a worker thread too.
    await asyncio.to_thread(_warm_up, counters, catalog, _warm_models(services.upstreams))
    services.policies = policies
    services.metrics.watch_policies(lambda: policies.reload_failure is not None)
    preparer = Preparer(
        policies=policies,
        counters=counters,
        catalog=catalog,
        store=services.started_store(),
        calibration=services.calibration,
        background_observer=services.metrics.record_background_summary,
        clock=services.clock,
    )
    services.preparer = preparer
    services.driver = CompletionDriver(
        preparer=preparer,
        store=services.started_store(),
        metrics=services.metrics,
        upstreams=services.upstreams,
        calibration=services.calibration,
        search_worker=services.search_worker,
        max_parsed_response_bytes=services.settings.server.max_parsed_response_bytes,
        prices=PriceTable(services.settings.prices, catalog),
        clock=services.clock,
    )
    watcher = asyncio.create_task(policies.watch(2.0), name="policy watcher")
    yield
    watcher.cancel()
    await _ended(watcher, _STOP_GRACE_S)
    preparer.close()


def _check_tenant_policies(settings: Settings, policies: PolicyStore) -> None:
    wanted = {t.policy for t in settings.tenants} | {"default"}
    missing = sorted(name for name in wanted if name not in policies)
    if missing:
        raise ValueError(f"{settings.source}: tenants: unknown policy {', '.join(missing)}")
    policies.require(wanted)  # a hot reload that would lose one keeps the last good set


def _warm_models(upstreams: Mapping[str, Upstream]) -> tuple[str, ...]:
    """A model of each encoding the configured upstreams speak natively (OpenAI's always)."""
    natives = {upstream.native_format for upstream in upstreams.values()}
    return ("gpt-4o", *(("claude-sonnet-4-5",) if "anthropic_messages" in natives else ()))


def _warm_up(counters: TokenCounters, catalog: ModelCatalog, models: tuple[str, ...]) -> None:
    for model in models:
        counters.for_model(model).count_text("warm up")
    catalog.lookup("gpt-4o")
