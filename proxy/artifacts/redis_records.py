"""`RedisRecords`: request records in Redis, on the artifact store's connection.

Per owner scope, under its hash tag: `rec:idx` (sorted set: request id by time), `rec:s:<id>`
(the summary) and `rec:d:<id>` (the detail), each with the TTL; one script call per scope and
batch (`_ADD`) writes them and trims the index of expired entries and of the oldest beyond
`max_records` (their keys deleted). `rec:scopes` (a
sorted set: scope by last write, noted by a process at most once a minute) lets an
operator read every tenant's records.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from redis.exceptions import NoScriptError

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
from proxy.artifacts.redis_clients import RedisClient
from proxy.artifacts.store import StoreUnavailable

_BATCH = 200
"""Summaries read per round trip while a page is filled."""
_NOTE_EVERY_S = 60.0
"""How often a process notes a scope it writes in the scopes' index (at most)."""
_MAX_NOTED = 10_000
"""Scopes remembered as lately noted in the scopes' index (all forgotten beyond)."""
_ADD = """
local index, base = KEYS[1], ARGV[1]
local ttl, now, most = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
for i = 5, #ARGV, 4 do
  local id = ARGV[i]
  redis.call('SET', base .. 's:' .. id, ARGV[i + 2], 'EX', ttl)
  redis.call('SET', base .. 'd:' .. id, ARGV[i + 3], 'EX', ttl)
  redis.call('ZADD', index, ARGV[i + 1], id)
end
redis.call('ZREMRANGEBYSCORE', index, '-inf', now - ttl)
local over = redis.call('ZRANGE', index, 0, -(most + 1))
for _, id in ipairs(over) do
  redis.call('DEL', base .. 's:' .. id, base .. 'd:' .. id)
end
if #over > 0 then
  redis.call('ZREMRANGEBYRANK', index, 0, #over - 1)
end
redis.call('EXPIRE', index, ttl)
return #over
"""
"""One scope's batch: each record's summary and detail with the TTL, its index entry; then the
index trimmed of what expired and of the oldest beyond `max_records` (their keys deleted)."""
_ADD_SHA = hashlib.sha1(_ADD.encode()).hexdigest()


class RedisRecords:
    def __init__(
        self,
        redis: RedisClient,
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
        self._noted: dict[str, float] = {}
        """When each scope was last noted in the scopes' index by this process."""

    def _base(self, scope: str) -> str:
        return f"{self._prefix}{{{self._tag(scope)}}}:rec:"

    @property
    def _scopes_key(self) -> str:
        return f"{self._prefix}rec:scopes"

    async def add_many(self, records: Sequence[tuple[str, Record]]) -> None:
        """One round trip for the batch: `_ADD` once per scope (and the scopes' index, when a
        scope was not noted there lately). A batch of one scope with nothing to note (the
        common case) is one plain command: redis-py's pipeline costs more CPU than the records'
        own encoding."""
        now, ttl = self._clock(), self._ttl
        by_scope: dict[str, list[str | bytes]] = {}
        for scope, record in records:
            by_scope.setdefault(scope, []).extend(
                (record.request_id, repr(record.time), orjson.dumps(record.summary),
                 orjson.dumps(record.detail))
            )  # fmt: skip
        lately = now - min(ttl / 10, _NOTE_EVERY_S)
        noted = {s: now for s in by_scope if self._noted.get(s, -math.inf) < lately}
        if len(by_scope) == 1 and not noted:
            ((scope, args),) = by_scope.items()
            await self._add_one(self._base(scope), repr(now), args)
        else:
            await self._add_piped(by_scope, noted, repr(now))
        if len(self._noted) + len(noted) > _MAX_NOTED:
            self._noted.clear()
        self._noted.update(noted)

    async def _add_one(self, base: str, now: str, args: list[str | bytes]) -> None:
        for attempt in range(2):
            try:
                await self._redis.execute_command(
                    "EVALSHA", _ADD_SHA, 1, f"{base}idx", base, self._ttl, now, self._max, *args
                )
            except NoScriptError:
                if attempt:
                    raise
                await self._run_script_load()
            except self._failures as exc:
                self._failed(exc)
                raise StoreUnavailable("the record store is unavailable") from exc
            else:
                self._recovered()
                return

    async def _add_piped(
        self, by_scope: dict[str, list[str | bytes]], noted: dict[str, float], now: str
    ) -> None:
        for attempt in range(2):
            pipe = self._redis.pipeline(transaction=False)
            for scope, args in by_scope.items():
                base = self._base(scope)
                pipe.evalsha(_ADD_SHA, 1, f"{base}idx", base, self._ttl, now, self._max, *args)
            if noted:
                pipe.zadd(self._scopes_key, noted)
            replies = await self._run(pipe, raise_on_error=False)
            if attempt == 0 and any(isinstance(r, NoScriptError) for r in replies):
                await self._run_script_load()
                continue
            failure = next((r for r in replies if isinstance(r, Exception)), None)
            if failure is not None:
                self._failed(failure)
                raise StoreUnavailable("the record store refused a write") from failure
            return

    async def _run_script_load(self) -> None:
        try:
            await self._redis.script_load(_ADD)
        except self._failures as exc:
            self._failed(exc)
            raise StoreUnavailable("the record store is unavailable") from exc

    async def _run(self, pipe: Any, *, raise_on_error: bool = True) -> list[Any]:
        try:
            results: list[Any] = await pipe.execute(raise_on_error=raise_on_error)
        except self._failures as exc:
            self._failed(exc)
            raise StoreUnavailable("the record store is unavailable") from exc
        self._recovered()
        return results

    async def _all_scopes(self, scopes: Sequence[str] | None) -> list[str]:
        if scopes is not None:
            return list(scopes)
        low = self._clock() - self._ttl
        pipe = self._redis.pipeline(transaction=False)
        pipe.zremrangebyscore(self._scopes_key, "-inf", low)  # the scopes' index is trimmed here
        pipe.zrangebyscore(self._scopes_key, low, "+inf")
        return [m.decode() for m in (await self._run(pipe))[1]]

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
