"""`RedisRecords`: request records in Redis, on the artifact store's connection.

Per owner scope, under its hash tag: `rec:idx` (sorted set: request id by time), `rec:s:<id>`
(the summary) and `rec:d:<id>` (the detail), each with the TTL; one write trims the index of
expired entries and of the oldest beyond `max_records` (their keys deleted). `rec:scopes` (a
sorted set: scope by last write) lets an operator read every tenant's records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
from redis.asyncio import Redis

from proxy.artifacts.records import (
    MAX_SCANNED,
    Entry,
    Page,
    Record,
    RecordQuery,
    after_cursor,
    collect,
    newest_first,
)
from proxy.artifacts.store import StoreUnavailable

_BATCH = 200
"""Summaries read per round trip while a page is filled."""


class RedisRecords:
    def __init__(
        self,
        redis: Redis,
        key_prefix: str,
        *,
        tag: Callable[[str], str],
        ttl_seconds: int,
        max_records: int,
        clock: Callable[[], float],
        failed: Callable[[BaseException], None],
        recovered: Callable[[], None],
        failures: tuple[type[BaseException], ...],
    ) -> None:
        self._redis, self._prefix, self._tag = redis, key_prefix, tag
        self._ttl, self._max, self._clock = ttl_seconds, max_records, clock
        self._failed, self._recovered, self._failures = failed, recovered, failures

    def _base(self, scope: str) -> str:
        return f"{self._prefix}{{{self._tag(scope)}}}:rec:"

    @property
    def _scopes_key(self) -> str:
        return f"{self._prefix}rec:scopes"

    async def add_many(self, records: Sequence[tuple[str, Record]]) -> None:
        """One round trip for the batch (two when a scope is over `max_records`)."""
        now, ttl = self._clock(), self._ttl
        pipe = self._redis.pipeline(transaction=False)
        scopes: dict[str, float] = {}
        for scope, record in records:
            base, rid = self._base(scope), record.request_id
            pipe.set(f"{base}s:{rid}", orjson.dumps(record.summary), ex=ttl)
            pipe.set(f"{base}d:{rid}", orjson.dumps(record.detail), ex=ttl)
            pipe.zadd(f"{base}idx", {rid: record.time})
            scopes[scope] = now
        for scope in scopes:
            index = f"{self._base(scope)}idx"
            pipe.zremrangebyscore(index, "-inf", now - ttl)
            pipe.expire(index, ttl)
            pipe.zrange(index, 0, -(self._max + 1))
        pipe.zadd(self._scopes_key, scopes)
        pipe.zremrangebyscore(self._scopes_key, "-inf", now - ttl)
        results = await self._run(pipe)
        over = results[3 * len(records) + 2 : -2 : 3]
        pipe = self._redis.pipeline(transaction=False)
        for scope, members in zip(scopes, over, strict=True):
            ids = [m.decode() for m in members]
            if ids:
                base = self._base(scope)
                pipe.zrem(f"{base}idx", *ids)
                pipe.delete(*(f"{base}{part}:{rid}" for rid in ids for part in ("s", "d")))
        if len(pipe):
            await self._run(pipe)

    async def _run(self, pipe: Any) -> list[Any]:
        try:
            results: list[Any] = await pipe.execute()
        except self._failures as exc:
            self._failed(exc)
            raise StoreUnavailable("the record store is unavailable") from exc
        self._recovered()
        return results

    async def _all_scopes(self, scopes: Sequence[str] | None) -> list[str]:
        if scopes is not None:
            return list(scopes)
        pipe = self._redis.pipeline(transaction=False)
        pipe.zrangebyscore(self._scopes_key, self._clock() - self._ttl, "+inf")
        return [m.decode() for m in (await self._run(pipe))[0]]

    async def _entries(self, scopes: Sequence[str] | None) -> list[Entry]:
        names = await self._all_scopes(scopes)
        if not names:
            return []
        pipe = self._redis.pipeline(transaction=False)
        low = self._clock() - self._ttl
        for scope in names:
            pipe.zrevrangebyscore(f"{self._base(scope)}idx", "+inf", low, withscores=True)
        found = await self._run(pipe)
        return newest_first(
            (score, member.decode(), scope)
            for scope, members in zip(names, found, strict=True)
            for member, score in members[:MAX_SCANNED]
        )

    async def _summaries(self, entries: Sequence[Entry]) -> list[dict[str, Any] | None]:
        pipe = self._redis.pipeline(transaction=False)
        for _, request_id, scope in entries:
            pipe.get(f"{self._base(scope)}s:{request_id}")
        return [None if raw is None else orjson.loads(raw) for raw in await self._run(pipe)]

    async def page(self, scopes: Sequence[str] | None, query: RecordQuery) -> Page:
        older = after_cursor(await self._entries(scopes), query.before)
        data: list[dict[str, Any]] = []
        for start in range(0, len(older), _BATCH):
            batch = await self._summaries(older[start : start + _BATCH])
            found, more = collect(batch, query, query.limit - len(data))
            data += found
            if more:
                return Page(data, True)
            if len(data) == query.limit:
                rest = older[start + _BATCH :]
                return Page(data, await self._any_matches(rest, query))
        return Page(data, False)

    async def _any_matches(self, rest: Sequence[Entry], query: RecordQuery) -> bool:
        for start in range(0, len(rest), _BATCH):
            batch = await self._summaries(rest[start : start + _BATCH])
            if collect(batch, query, 0)[1]:
                return True
        return False

    async def summaries(
        self, scopes: Sequence[str] | None, query: RecordQuery
    ) -> list[dict[str, Any]]:
        entries = await self._entries(scopes)
        found: list[dict[str, Any]] = []
        for start in range(0, len(entries), _BATCH):
            found += collect(await self._summaries(entries[start : start + _BATCH]), query, None)[0]
        return found

    async def get(self, scopes: Sequence[str] | None, request_id: str) -> dict[str, Any] | None:
        names = await self._all_scopes(scopes)
        if not names:
            return None
        pipe = self._redis.pipeline(transaction=False)
        for scope in names:
            pipe.get(f"{self._base(scope)}s:{request_id}")
            pipe.get(f"{self._base(scope)}d:{request_id}")
        found = await self._run(pipe)
        for summary, detail in zip(found[::2], found[1::2], strict=True):
            if summary is not None:
                return {**orjson.loads(summary), **(orjson.loads(detail) if detail else {})}
        return None
