"""Request records: what each completion did, kept per tenant for a while (`RecordStore`).

A record is a summary (small, what lists and filters read) and a detail (the manifest, headers,
synthetic rounds and, when the policy opts in, the bodies). Records are kept per owner scope
(a tenant's scope without its session), at most `max_records` of them, each for `ttl_seconds`;
`scopes=None` in a query reads every scope (an operator). `MemoryRecords` is the in-process
store; `artifacts.redis_records.RedisRecords` the shared one.

Lists are newest first, by (time, request id); `before` pages to records older than the one it
names.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_SCANNED = 20_000
"""The most records one query reads (an operator's query over many tenants stops there)."""
MAX_MEMORY_SCOPES = 10_000
"""The most scopes `MemoryRecords` keeps (the least recently written one goes first)."""


class UnknownRecord(LookupError):
    """A query's `before` names no record the caller can see (unknown, expired or foreign)."""


class Record(Protocol):
    """One request's record, as the store takes it (its parts may be built when first read)."""

    @property
    def request_id(self) -> str: ...

    @property
    def time(self) -> float:
        """Wall-clock seconds when the request arrived."""
        ...

    @property
    def summary(self) -> dict[str, Any]:
        """The record's list entry (carries `request_id`, `time`, `tenant`, `session`, ...)."""
        ...

    @property
    def detail(self) -> dict[str, Any]:
        """What the full record adds to the summary (its values JSON-serialisable by orjson)."""
        ...


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record with its parts built (as read back from Redis)."""

    request_id: str
    time: float
    summary: dict[str, Any]
    detail: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """Which records: each field given must equal the summary's (None: any)."""

    status: int | None = None
    outcome: str | None = None
    model: str | None = None
    session: str | None = None
    """The session's digest (as the summary keeps it)."""
    tenant: str | None = None
    policy: str | None = None
    limit: int = DEFAULT_LIMIT
    before: str | None = None

    def matches(self, summary: Mapping[str, Any]) -> bool:
        wanted = (
            ("status", self.status),
            ("outcome", self.outcome),
            ("model", self.model),
            ("session", self.session),
            ("tenant", self.tenant),
            ("policy", self.policy),
        )
        return all(value is None or summary.get(name) == value for name, value in wanted)


@dataclass(frozen=True, slots=True)
class Page:
    data: list[dict[str, Any]]
    has_more: bool


Entry = tuple[float, str, str]
"""(time, request id, scope) of one record: what a query orders and pages by."""


class RecordStore(Protocol):
    async def add_many(self, records: Sequence[tuple[str, Record]]) -> None:
        """Keep each `(scope, record)`, in order (raises `StoreUnavailable` when the store
        fails: none of them may be kept)."""
        ...

    async def page(self, scopes: Sequence[str] | None, query: RecordQuery) -> Page:
        """The newest records matching `query` (`UnknownRecord`: `before` is not among them)."""
        ...

    async def summaries(
        self, scopes: Sequence[str] | None, query: RecordQuery
    ) -> list[dict[str, Any]]:
        """Every kept summary matching `query` (at most `MAX_SCANNED` read), newest first."""
        ...

    async def get(self, scopes: Sequence[str] | None, request_id: str) -> dict[str, Any] | None:
        """The whole record (summary and detail), if one of `scopes` holds it."""
        ...


def newest_first(entries: Iterable[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e[0], e[1]), reverse=True)[:MAX_SCANNED]


def after_cursor(entries: list[Entry], before: str | None) -> list[Entry]:
    """The entries older than the one named `before` (all without it)."""
    if before is None:
        return entries
    for index, entry in enumerate(entries):
        if entry[1] == before:
            return entries[index + 1 :]
    raise UnknownRecord(before)


def collect(
    summaries: Iterable[Mapping[str, Any] | None], query: RecordQuery, limit: int | None
) -> tuple[list[dict[str, Any]], bool]:
    """The first `limit` summaries matching (None: all), and whether more match."""
    found: list[dict[str, Any]] = []
    for summary in summaries:
        if summary is None or not query.matches(summary):
            continue
        if limit is not None and len(found) == limit:
            return found, True
        found.append(dict(summary))
    return found, False


@dataclass(slots=True)
class _Kept:
    record: Record
    expires_at: float


class MemoryRecords:
    """Per-process records: per scope, an insertion-ordered dict (the oldest written goes first
    beyond `max_records`, and expires first: records are written in the order they end). A
    record's parts are built only when it is first read (`Record`)."""

    def __init__(
        self,
        *,
        ttl_seconds: int,
        max_records: int,
        max_scopes: int = MAX_MEMORY_SCOPES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._ttl, self._max, self._max_scopes = ttl_seconds, max_records, max_scopes
        self._clock = clock
        self._scopes: OrderedDict[str, OrderedDict[str, _Kept]] = OrderedDict()

    async def add_many(self, records: Sequence[tuple[str, Record]]) -> None:
        expires_at = self._clock() + self._ttl
        for scope, record in records:
            kept = self._scopes.get(scope)
            if kept is None:
                kept = self._scopes[scope] = OrderedDict()
                if len(self._scopes) > self._max_scopes:
                    self._scopes.popitem(last=False)
            else:
                self._scopes.move_to_end(scope)
            kept[record.request_id] = _Kept(record, expires_at)
            if len(kept) > self._max:
                kept.popitem(last=False)

    def _expire(self, scope: str) -> OrderedDict[str, _Kept]:
        """The scope's records, the expired ones dropped (the oldest written come first)."""
        kept = self._scopes.get(scope, OrderedDict())
        now = self._clock()
        while kept:
            request_id, first = next(iter(kept.items()))
            if first.expires_at > now:
                break
            del kept[request_id]
        return kept

    def _live(self, scopes: Sequence[str] | None) -> dict[str, _Kept]:
        names = list(self._scopes) if scopes is None else scopes
        return {rid: k for scope in names for rid, k in self._expire(scope).items()}

    def _entries(self, scopes: Sequence[str] | None) -> tuple[list[Entry], dict[str, _Kept]]:
        live = self._live(scopes)
        entries = [(k.record.time, rid, "") for rid, k in live.items()]
        return newest_first(entries), live

    async def page(self, scopes: Sequence[str] | None, query: RecordQuery) -> Page:
        entries, live = self._entries(scopes)
        older = after_cursor(entries, query.before)
        data, more = collect((live[e[1]].record.summary for e in older), query, query.limit)
        return Page(data, more)

    async def summaries(
        self, scopes: Sequence[str] | None, query: RecordQuery
    ) -> list[dict[str, Any]]:
        entries, live = self._entries(scopes)
        return collect((live[e[1]].record.summary for e in entries), query, None)[0]

    async def get(self, scopes: Sequence[str] | None, request_id: str) -> dict[str, Any] | None:
        kept = self._live(scopes).get(request_id)
        if kept is None:
            return None
        return {**kept.record.summary, **kept.record.detail}
