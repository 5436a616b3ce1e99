"""`RedisStore`: the shared artifact store for N proxy replicas (Redis or Redis Cluster).

Key scheme (every key of a scope carries the hash tag of the scope's budget owner,
`budgets.budget_owner`: the tenant's scope without session or sub-scope, so a Cluster keeps an
owner on one slot and a pipeline or script for one scope never crosses slots):

    {prefix}{<owner-tag>}:a:<artifact id>   the artifact value (a scope that is its own owner)
    {prefix}{<owner-tag>}:idx               sorted set: artifact id -> last reference time
    {prefix}{<owner-tag>}:<scope-tag>:a:<id>, :<scope-tag>:idx   the same for another scope of
                                            the owner (a session, the working set, summaries)
    {prefix}{<scope-tag>}:claim:<digest>    a claim (`claim`): 32 hex chars of SHA-256(key)
    {prefix}{<owner-tag>}:live|exp|rate     the owner's write budgets (`redis_budgets`)

A tag is 24 hex chars of SHA-256(scope); the scope itself never appears in a key.

Value layout: `redis_values`.

Round trips per `put_many` (one scope, any number of items):
  * 1 when every artifact already exists (a history re-sent each turn): a pipeline of
    `EXPIRE` per id (1 = exists, TTL refreshed), `ZADD` to the index, `EXPIRE` on the index and
    `ZRANGE` of the entries beyond `max_per_scope`. No payload is sent.
  * 2 when something is missing or must be evicted: the second pipeline `SET ... EX` only the
    missing payloads, `DEL`s the evicted payload keys and `ZREM`s them from the index.
With write budgets (`budgets`), the first pipeline also extends the owner's accounting keys
(`redis_budgets.TOUCH`) and the second is one script (`redis_budgets.WRITE`) that checks the
budgets and writes, atomically: still one round trip, or two.
Both pipelines are non-transactional and every command in them is idempotent, so a retry after
a dropped connection is safe. A concurrent writer can at worst evict an artifact another replica
just refreshed, which is the cap's semantics anyway; a failed `SET` leaves an index entry with no
payload, which only counts against the cap until trimmed or expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import urlsplit

from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from proxy.artifacts import redis_budgets, redis_clients
from proxy.artifacts.budgets import (
    Confirmed,
    RefusalRecorder,
    Tally,
    WriteBudget,
    WriteBudgets,
    WriteLimit,
    budget_owner,
    counted_bytes,
)
from proxy.artifacts.leases import Leases
from proxy.artifacts.redis_budgets import ScopeKeys
from proxy.artifacts.redis_checks import start_up_warnings
from proxy.artifacts.redis_clients import RedisClient
from proxy.artifacts.redis_health import StoreHealth
from proxy.artifacts.redis_ratios import RedisCountRatios
from proxy.artifacts.redis_records import RedisRecords
from proxy.artifacts.redis_values import decode_value, encode_value
from proxy.artifacts.store import (
    Artifact,
    NewArtifact,
    StoreUnavailable,
    _Ids,
    check_put_arguments,
    is_artifact_id,
)

__all__ = ["RedisStore", "decode_value", "encode_value"]

_THREAD_OVER_BYTES = 1 << 20  # encode/decode bigger values off the event loop
_FAILURES = (RedisError, RedisClusterException, OSError, asyncio.TimeoutError)
_DEFAULT_LOGGER = logging.getLogger("ctxproxy.artifacts")
_BUDGETED = frozenset({"live_bytes", "bytes_per_minute"})


class RedisStore(_Ids):
    """Artifact store on one Redis server, through a blocking connection pool (waits for a free
    connection up to `pool_timeout` instead of failing at once when all `pool_size` connections
    are busy), or on a Redis Cluster (`cluster=True`: `url` and `cluster_nodes` are nodes to
    discover it from; the pool is per node, `redis_clients`)."""

    def __init__(
        self,
        url: str,
        secret: bytes,
        *,
        cluster: bool = False,
        cluster_nodes: Sequence[str] = (),
        key_prefix: str = "ctxproxy:",
        pool_size: int = 32,
        pool_timeout: float = 2.0,
        socket_timeout: float = 2.0,
        connect_timeout: float | None = None,
        compress_over: int = 4096,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | None = None,
        budgets: WriteBudgets | None = None,
    ) -> None:
        super().__init__(secret)
        if "{" in key_prefix or "}" in key_prefix:
            raise ValueError("key_prefix must not contain '{' or '}' (it would break hash tags)")
        self._prefix = key_prefix
        self._compress_over = compress_over
        self._clock = clock
        self._log = logger or _DEFAULT_LOGGER
        self._budgets = budgets or WriteBudgets()
        self.refused_writes = RefusalRecorder(self._log, clock)
        """The writes the budgets refused (read by /metrics at scrape time)."""
        self._where = redis_clients.where(url, cluster=cluster)  # no credentials
        self._health = StoreHealth(self._where, urlsplit(url).password, self._log)
        connect = socket_timeout if connect_timeout is None else connect_timeout
        timeouts = {"socket_timeout": socket_timeout, "connect_timeout": connect}
        self._redis: RedisClient = (
            redis_clients.cluster_client(
                url, pool_size=pool_size, more_nodes=cluster_nodes, **timeouts
            )
            if cluster
            else redis_clients.standalone_client(
                url, pool_size=pool_size, pool_timeout=pool_timeout, **timeouts
            )
        )
        self._leases = Leases()

    # -- what tools (and tests) may look at ---------------------------------------------------

    @property
    def client(self) -> RedisClient:
        """The Redis client the store sends every command through (it owns it: `close` closes
        it)."""
        return self._redis

    @property
    def failed_operations(self) -> int:
        """Store operations that failed since start (read by /metrics at scrape time)."""
        return self._health.failed_operations

    def pinned(self, scope: str, artifact_id: str) -> bool:
        """Whether a lease of this process pins the artifact (this store's cap keeps it)."""
        return self._leases.pinned(scope, artifact_id)

    # -- keys ---------------------------------------------------------------------------------

    def _tag(self, scope: str) -> str:
        return hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()[:24]

    def _keys(self, scope: str) -> ScopeKeys:
        owner = budget_owner(scope)
        base = f"{self._prefix}{{{self._tag(owner)}}}:"
        return ScopeKeys(base, base if owner == scope else f"{base}{self._tag(scope)}:")

    # -- store API ----------------------------------------------------------------------------

    def lease(self) -> contextlib.AbstractContextManager[None]:
        """Pins of this process only: another replica's cap may still evict them."""
        return self._leases.lease()

    def count_ratios(self) -> RedisCountRatios:
        """The replicas' shared count ratios, on this store's connection and key prefix."""
        return RedisCountRatios(
            self._redis,
            self._prefix,
            failed=self._health.failed,
            recovered=self._health.recovered,
            failures=_FAILURES,
        )

    def request_records(self, *, ttl_seconds: int, max_records: int) -> RedisRecords:
        """Request records on this store's connection and key prefix (`redis_records`)."""
        return RedisRecords(
            self._redis, self._prefix, tag=self._tag, ttl_seconds=ttl_seconds,
            max_records=max_records, clock=self._clock, failed=self._health.failed,
            recovered=self._health.recovered, failures=_FAILURES,
        )  # fmt: skip

    async def check_eviction_policy(self) -> None:
        """Log a warning line when Redis' eviction policy can drop live artifacts, and one when
        Redis has no memory bound (start-up; an unreachable Redis or a hidden INFO is left to
        the usual health reporting)."""
        try:
            infos = await redis_clients.memory_infos(self._redis)
        except (*_FAILURES, TypeError) as exc:
            self._log.debug("maxmemory-policy not checked: %s", type(exc).__name__)
            return
        for warning in start_up_warnings(infos):
            self._log.warning("artifact store at %s: %s", self._where, warning)

    async def put_many(
        self,
        scope: str,
        items: Mapping[str, NewArtifact],
        *,
        ttl_seconds: int,
        max_per_scope: int,
    ) -> set[str]:
        check_put_arguments(items, ttl_seconds, max_per_scope)
        if not items:
            return set()
        self._leases.pin(scope, items)
        keys, budget = self._keys(scope), self._budgets.of(budget_owner(scope))
        try:
            existing, overflow = await self._refresh(
                keys, list(items), ttl_seconds, max_per_scope, budget
            )
        except _FAILURES as exc:
            self._health.failed(exc)
            return set()
        # The cap evicts others first: never this batch, nor what a lease here pins.
        evicted = [
            aid for aid in overflow if aid not in items and not self._leases.pinned(scope, aid)
        ]
        missing = {aid: it for aid, it in items.items() if not existing[aid]}
        tally = Tally(budget)
        try:
            if budget.limited:
                stored = await self._write_budgeted(
                    keys, missing, evicted, len(overflow), ttl_seconds, budget, tally
                )
            else:
                stored = await self._write(keys, missing, set(evicted), ttl_seconds)
        except _FAILURES as exc:  # the refreshed ones stay confirmed
            self._health.failed(exc)
            stored = {}
        refused = tally.refusals()
        if refused:
            self.refused_writes.record(budget_owner(scope), refused)
        written = [aid for aid in items if existing[aid] or stored.get(aid, False)]
        return Confirmed(written, refused)

    async def claim(self, scope: str, key: str, *, ttl_seconds: int) -> bool:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        name = f"{self._prefix}{{{self._tag(scope)}}}:claim:{digest}"
        try:
            taken = await self._redis.set(name, b"1", nx=True, ex=max(ttl_seconds, 1))
        except _FAILURES as exc:
            self._health.failed(exc)
            return False
        self._health.recovered()
        return bool(taken)

    async def get(self, scope: str, artifact_id: str) -> Artifact | None:
        if not is_artifact_id(artifact_id):
            return None
        try:
            raw = await self._redis.get(self._keys(scope).payload(artifact_id))
        except _FAILURES as exc:
            self._health.failed(exc)
            raise StoreUnavailable(f"artifact store at {self._where} is unavailable") from exc
        self._health.recovered()
        if not isinstance(raw, bytes):  # None (missing); str cannot occur: no decode_responses
            return None
        self._leases.pin(scope, (artifact_id,))
        try:
            if len(raw) > _THREAD_OVER_BYTES:
                return await asyncio.to_thread(decode_value, artifact_id, raw)
            return decode_value(artifact_id, raw)
        except (ValueError, zlib.error) as exc:
            self._log.warning(
                "artifact %s is unreadable and is treated as missing: %s", artifact_id, exc
            )
            return None

    async def get_many(self, scope: str, artifact_ids: Sequence[str]) -> dict[str, Artifact]:
        ids = [aid for aid in artifact_ids if is_artifact_id(aid)]
        if not ids:
            return {}
        keys = self._keys(scope)
        try:
            raws = await self._redis.mget([keys.payload(aid) for aid in ids])
        except _FAILURES as exc:
            self._health.failed(exc)
            raise StoreUnavailable(f"artifact store at {self._where} is unavailable") from exc
        self._health.recovered()
        found = {}
        for aid, raw in zip(ids, raws, strict=True):
            if isinstance(raw, bytes):
                artifact = self._decoded(aid, raw)
                if artifact is not None:
                    found[aid] = artifact
        self._leases.pin(scope, found)
        return found

    def _decoded(self, artifact_id: str, raw: bytes) -> Artifact | None:
        try:
            return decode_value(artifact_id, raw)
        except (ValueError, zlib.error) as exc:
            self._log.warning(
                "artifact %s is unreadable and is treated as missing: %s", artifact_id, exc
            )
            return None

    async def ping(self) -> bool:
        try:
            await redis_clients.ping(self._redis)
        except _FAILURES as exc:
            self._health.failed(exc)
            return False
        self._health.recovered()
        return True

    async def close(self) -> None:
        await self._redis.aclose()  # owns the pool (from_pool): disconnects it too

    # -- round trips --------------------------------------------------------------------------

    async def _refresh(
        self, keys: ScopeKeys, ids: list[str], ttl: int, max_per_scope: int, budget: WriteBudget
    ) -> tuple[dict[str, bool], list[str]]:
        """Round trip 1: refresh TTLs, record references, find the oldest beyond the cap (oldest
        first); with a live-bytes budget, keep the owner's accounting alive as long."""
        now = self._clock()
        pipe = self._redis.pipeline(transaction=False)
        for aid in ids:
            pipe.expire(keys.payload(aid), ttl)
        # Later items of a batch count as referenced later (microsecond steps).
        pipe.zadd(keys.index, {aid: now + i * 1e-6 for i, aid in enumerate(ids)})
        pipe.expire(keys.index, ttl)
        pipe.zrange(keys.index, 0, -(max_per_scope + 1))
        if budget.live_bytes is not None:
            live, expiry, _ = keys.accounting
            pipe.evalsha(redis_budgets.TOUCH_SHA, 2, live, expiry, ttl)
        results = await pipe.execute(raise_on_error=False)
        if budget.live_bytes is not None:
            touched = results.pop()
            if isinstance(touched, NoScriptError):  # Redis restarted: load it, once more
                touched = await redis_budgets.touch(self._redis, keys, ttl)
            results.append(touched)
        self._health.note_errors(results)
        existing = {aid: results[i] is True for i, aid in enumerate(ids)}
        overflow = results[len(ids) + 2]
        evicted = [] if isinstance(overflow, Exception) else [m.decode() for m in overflow]
        return existing, evicted

    async def _write(
        self, keys: ScopeKeys, missing: dict[str, NewArtifact], evicted: set[str], ttl: int
    ) -> dict[str, bool]:
        """Round trip 2 (only when needed): store missing payloads, delete evicted ones."""
        to_store = {aid: item for aid, item in missing.items() if aid not in evicted}
        values = await self._encode_all(to_store)
        if not values and not evicted:
            self._health.recovered()
            return {}
        pipe = self._redis.pipeline(transaction=False)
        for aid, value in values.items():
            pipe.set(keys.payload(aid), value, ex=ttl)
        if evicted:
            pipe.delete(*(keys.payload(aid) for aid in evicted))
            pipe.zrem(keys.index, *evicted)
        results = await pipe.execute(raise_on_error=False)
        self._health.note_errors(results)
        return {aid: results[i] is True for i, aid in enumerate(values)}

    async def _write_budgeted(
        self,
        keys: ScopeKeys,
        missing: dict[str, NewArtifact],
        evicted: list[str],
        overflow: int,
        ttl: int,
        budget: WriteBudget,
        tally: Tally,
    ) -> dict[str, bool]:
        """Round trip 2 with write budgets: one script checks them and writes what they allow
        (`redis_budgets.WRITE`); what they refuse goes to `tally`."""
        values = await self._encode_all({a: i for a, i in missing.items() if a not in evicted})
        if not values and not evicted:
            self._health.recovered()
            return {}
        sizes = {aid: counted_bytes(missing[aid].content) for aid in values}
        now = self._clock()
        reply = await redis_budgets.write(
            self._redis, keys, values, sizes, evicted, overflow, ttl=ttl, budget=budget, now=now
        )
        found = redis_budgets.statuses(reply, list(values))
        if found is None:
            self._health.note_errors([reply if isinstance(reply, Exception) else ValueError(reply)])
            return {}
        errors = [s for s in found.values() if s != "ok" and s not in _BUDGETED]
        self._health.note_errors([RedisError(errors[0])] if errors else [])
        for aid, status in found.items():
            if status in _BUDGETED:
                tally.add(WriteLimit(status), sizes[aid])
        return {aid: status == "ok" for aid, status in found.items()}

    async def _encode_all(self, items: dict[str, NewArtifact]) -> dict[str, bytes]:
        """Encode payloads; an item whose meta cannot be serialised is left out (-> False)."""
        created_at = self._clock()
        values: dict[str, bytes] = {}
        for aid, item in items.items():
            try:
                if len(item.content) > _THREAD_OVER_BYTES:
                    values[aid] = await asyncio.to_thread(
                        encode_value, item, created_at, self._compress_over
                    )
                else:
                    values[aid] = encode_value(item, created_at, self._compress_over)
            except (TypeError, ValueError) as exc:
                self._log.warning(
                    "artifact %s not stored: unserialisable kind/meta (%s)", aid, type(exc).__name__
                )
        return values
