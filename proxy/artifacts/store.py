"""Artifact store contract, ids, and the in-process `MemoryStore`.

Content that context preparation removes from a prompt (offloaded tool results, cleared results,
archived turns) is kept here, per scope (tenant), for a TTL, so the model can read it back through
the synthetic tools. `proxy.artifacts.redis_store.RedisStore` is the shared production
implementation.

Ids are `art_` + 32 hex chars of HMAC-SHA256(secret, scope, content): stable across requests and
replicas (same secret), unguessable without the secret, and meaningless in another scope. They are
computed once, by whoever prepares the content (`ArtifactStore.artifact_id`), and handed to
`put_many` with it: the store keys what it is given and never recomputes an id.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import re
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy.artifacts.budgets import (
    Confirmed,
    Ledger,
    RefusalRecorder,
    Tally,
    WriteBudgets,
    budget_owner,
    counted_bytes,
)
from proxy.artifacts.leases import Leases, PinKey
from proxy.jsonio.slices import LONG_CHARS, utf8_slices

ID_PREFIX = "art_"
ID_HEX_CHARS = 32
_ID_PATTERN = re.compile(r"art_[0-9a-f]{32}\Z")
DEFAULT_MEMORY_MAX_BYTES = 256 * 1024 * 1024
_ENTRY_OVERHEAD_BYTES = 512
_LOG = logging.getLogger("ctxproxy.artifacts")


class StoreUnavailable(Exception):
    """The store could not be reached or refused the operation (raised by `get` only)."""


@dataclass(frozen=True)
class NewArtifact:
    """Content to store; `kind` says what it is (e.g. `tool_result`, `turns`)."""

    content: str
    kind: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Artifact:
    """A stored artifact as read back; `created_at` is wall-clock seconds of its first write."""

    id: str
    content: str
    kind: str
    meta: dict[str, Any]
    created_at: float


class ArtifactStore(Protocol):
    """What steps, the read tool and handlers rely on; `put_many` never raises on store failure."""

    def artifact_id(self, scope: str, content: str) -> str: ...

    async def put_many(
        self,
        scope: str,
        items: Mapping[str, NewArtifact],
        *,
        ttl_seconds: int,
        max_per_scope: int,
    ) -> set[str]:
        """Store each `artifact id -> artifact` (ids from `artifact_id(scope, content)`), in
        order; return the ids whose write is confirmed. The cap evicts the scope's least
        recently referenced artifacts other than these (and other than those a lease pins): a
        batch larger than `max_per_scope` is kept whole. A store with write budgets
        (`artifacts.budgets`) refuses what its owner's budgets do not allow and answers a
        `budgets.Confirmed`, which names them."""
        ...

    def lease(self) -> contextlib.AbstractContextManager[None]:
        """Pin everything the calls inside store, refresh or read until the block ends: no
        limit of this process evicts it meanwhile (one request in flight holds one lease)."""
        ...

    async def get(self, scope: str, artifact_id: str) -> Artifact | None: ...

    async def get_many(self, scope: str, artifact_ids: Sequence[str]) -> dict[str, Artifact]:
        """The artifacts of `scope` among `artifact_ids` that exist (one round trip)."""
        ...

    async def claim(self, scope: str, key: str, *, ttl_seconds: int) -> bool:
        """Take `key` of `scope` for `ttl_seconds` unless someone (this replica or another)
        holds it: True when taken (a SET NX lease, e.g. for work only one replica should do).
        False also when the store does not answer."""
        ...

    async def ping(self) -> bool: ...

    async def close(self) -> None: ...


def _utf8(text: str) -> bytes:
    # surrogatepass: lone surrogates (accepted by the stdlib JSON parser) must not crash a write.
    return text.encode("utf-8", "surrogatepass")


def compute_artifact_id(secret: bytes, scope: str, content: str) -> str:
    """`art_` + HMAC-SHA256(secret, scope, content)[:32 hex]. Pure; no I/O. The scope is
    length-prefixed so that no (scope, content) pair can collide with another by moving a
    separator between them; a long content is fed a slice at a time (the GIL held to encode one).
    """
    scope_bytes = _utf8(scope)
    prefix = len(scope_bytes).to_bytes(4, "big") + scope_bytes + b"\x00"
    if len(content) < LONG_CHARS:  # one shot: no HMAC object
        return ID_PREFIX + hmac.digest(secret, prefix + _utf8(content), "sha256").hex()[:32]
    mac = hmac.new(secret, prefix, "sha256")
    for piece in utf8_slices(content):
        mac.update(piece)
    return ID_PREFIX + mac.hexdigest()[:ID_HEX_CHARS]


def is_artifact_id(value: object) -> bool:
    """True when `value` has the shape of an artifact id (says nothing about existence)."""
    return isinstance(value, str) and _ID_PATTERN.match(value) is not None


def check_put_arguments(ids: Iterable[str], ttl_seconds: int, max_per_scope: int) -> None:
    """Reject programmer errors loudly (policy validation already guarantees both limits are > 0;
    ids come from `artifact_id`, so a malformed one is a bug, never user input)."""
    bad = next((i for i in ids if not is_artifact_id(i)), None)
    if bad is not None:
        raise ValueError(f"not an artifact id: {bad!r}")
    if ttl_seconds <= 0:
        raise ValueError(f"ttl_seconds must be > 0, got {ttl_seconds}")
    if max_per_scope <= 0:
        raise ValueError(f"max_per_scope must be > 0, got {max_per_scope}")


class _Ids:
    """Shared id computation for the store implementations."""

    def __init__(self, secret: bytes) -> None:
        if not isinstance(secret, bytes) or not secret:
            raise ValueError("artifact store secret must be non-empty bytes")
        self._secret = secret

    def __repr__(self) -> str:  # never show the secret
        return f"{type(self).__name__}(...)"

    def artifact_id(self, scope: str, content: str) -> str:
        return compute_artifact_id(self._secret, scope, content)


@dataclass
class _Entry:
    artifact: Artifact
    expires_at: float
    size: int
    counted: int = 0
    """What it counts against its owner's live bytes (0 when the owner had no budget)."""


def _held_size(item: NewArtifact) -> int:
    """What an entry holds in memory: the content object itself plus a fixed allowance for the
    entry, its index slots and a small meta (`sys.getsizeof` is O(1) on a str)."""
    return sys.getsizeof(item.content) + _ENTRY_OVERHEAD_BYTES


MAX_CLAIMS = 100_000
"""Claims the memory store holds at most (expired ones are dropped when it is reached)."""


class MemoryStore(_Ids):
    """Per-process store: a dict of scopes, each an LRU (by last reference) of entries, plus one
    LRU over all scopes for the byte budget.

    TTL is honoured on read; a put of an existing artifact refreshes its TTL and recency without
    replacing it. A scope holding more than `max_per_scope` artifacts, or a store holding more
    than `max_bytes`, drops the least recently referenced artifacts first, never one that the
    same `put_many` references or that a lease in flight pins (so both limits can be exceeded
    while requests that need more are in flight; the excess goes when their leases end).
    Expired entries of idle scopes are swept at most every `sweep_interval` seconds (during a
    put), so memory stays bounded by live content. `budgets` bound what each owner writes
    (`artifacts.budgets`: `Ledger` keeps its live bytes and rate bucket).
    """

    def __init__(
        self,
        secret: bytes,
        *,
        max_bytes: int = DEFAULT_MEMORY_MAX_BYTES,
        clock: Callable[[], float] = time.time,
        sweep_interval: float = 60.0,
        budgets: WriteBudgets | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        super().__init__(secret)
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0, got {max_bytes}")
        self._max_bytes = max_bytes
        self._clock = clock
        self._budgets = budgets or WriteBudgets()
        self._ledger = Ledger()
        self.refused_writes = RefusalRecorder(logger or _LOG, clock)
        """The writes the budgets refused (read by /metrics at scrape time)."""
        self._sweep_interval = sweep_interval
        self._next_sweep = clock() + sweep_interval
        self._scopes: dict[str, OrderedDict[str, _Entry]] = {}
        self._recency: OrderedDict[PinKey, None] = OrderedDict()
        self._held_bytes = 0
        self._leases = Leases(on_release=lambda: self._trim_budget(set()))
        self._claims: dict[tuple[str, str], float] = {}

    @property
    def held_bytes(self) -> int:
        """Bytes held by the stored artifacts, as the budget counts them."""
        return self._held_bytes

    @property
    def held_claims(self) -> int:
        """Claims held, expired ones included until they are dropped (at `MAX_CLAIMS`)."""
        return len(self._claims)

    def lease(self) -> contextlib.AbstractContextManager[None]:
        return self._leases.lease()

    async def claim(self, scope: str, key: str, *, ttl_seconds: int) -> bool:
        now = self._clock()
        held = self._claims.get((scope, key))
        if held is not None and held > now:
            return False
        if len(self._claims) >= MAX_CLAIMS:  # expired ones go first
            self._claims = {k: t for k, t in self._claims.items() if t > now}
        self._claims[(scope, key)] = now + ttl_seconds
        return True

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
        now = self._clock()
        self._sweep_if_due(now)
        owner = budget_owner(scope)
        tally = Tally(self._budgets.of(owner))
        ttl = ttl_seconds
        written = [aid for aid, it in items.items() if self._put(scope, aid, it, now, ttl, tally)]
        entries = self._scopes.get(scope)
        if entries is not None:
            self._trim_scope(scope, entries, now, max_per_scope, keep=items.keys())
        self._trim_budget({(scope, aid) for aid in written})
        refused = tally.refusals()
        if refused:
            self.refused_writes.record(owner, refused)
        return Confirmed(written, refused)

    def _put(
        self, scope: str, aid: str, item: NewArtifact, now: float, ttl_seconds: int, tally: Tally
    ) -> bool:
        """Refresh or store one artifact; False when its owner's budgets refuse it."""
        entries = self._scopes.get(scope)
        entry = None if entries is None else entries.get(aid)
        if entry is not None and entry.expires_at > now:
            entry.expires_at = now + ttl_seconds
        else:
            if entry is not None:
                self._remove(scope, aid)
            owner = budget_owner(scope)
            budget = self._budgets.of(owner)
            counted = counted_bytes(item.content) if budget.limited else 0
            if budget.limited:
                refused = self._ledger.refusal(
                    owner, budget, counted, now, lambda: self._prune_owner(owner, now)
                )
                if refused is not None:
                    tally.add(refused, counted)
                    return False
            artifact = Artifact(aid, item.content, item.kind, dict(item.meta), now)
            entry = _Entry(artifact, now + ttl_seconds, _held_size(item), counted)
            self._scopes.setdefault(scope, OrderedDict())[aid] = entry
            self._held_bytes += entry.size
            self._ledger.added(owner, counted)
        self._scopes[scope].move_to_end(aid)
        self._recency[(scope, aid)] = None
        self._recency.move_to_end((scope, aid))
        return True

    async def get(self, scope: str, artifact_id: str) -> Artifact | None:
        if not is_artifact_id(artifact_id):
            return None
        entries = self._scopes.get(scope)
        if entries is None:
            return None
        entry = entries.get(artifact_id)
        if entry is None:
            return None
        if entry.expires_at <= self._clock():
            self._remove(scope, artifact_id)
            return None
        self._leases.pin(scope, (artifact_id,))
        return entry.artifact

    async def get_many(self, scope: str, artifact_ids: Sequence[str]) -> dict[str, Artifact]:
        found = {}
        for artifact_id in artifact_ids:
            artifact = await self.get(scope, artifact_id)
            if artifact is not None:
                found[artifact_id] = artifact
        return found

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._scopes.clear()
        self._recency.clear()
        self._held_bytes = 0
        self._ledger.clear()

    def _remove(self, scope: str, artifact_id: str) -> None:
        entries = self._scopes[scope]
        entry = entries.pop(artifact_id)
        self._held_bytes -= entry.size
        self._ledger.removed(budget_owner(scope), entry.counted)
        del self._recency[(scope, artifact_id)]
        if not entries:
            del self._scopes[scope]

    def _evictable(self, scope: str, artifact_id: str, keep: Container[str]) -> bool:
        return artifact_id not in keep and not self._leases.pinned(scope, artifact_id)

    def _trim_scope(
        self,
        scope: str,
        entries: OrderedDict[str, _Entry],
        now: float,
        max_per_scope: int,
        keep: Container[str],
    ) -> None:
        if len(entries) <= max_per_scope:
            return
        for aid in [aid for aid, entry in entries.items() if entry.expires_at <= now]:
            self._remove(scope, aid)
        over = len(entries) - max_per_scope
        for aid in [aid for aid in entries if self._evictable(scope, aid, keep)][: max(over, 0)]:
            self._remove(scope, aid)

    def _trim_budget(self, keep: set[PinKey]) -> None:
        """Least recently referenced first, across scopes, until the budget holds again."""
        excess = self._held_bytes - self._max_bytes
        if excess <= 0:
            return
        victims: list[PinKey] = []
        for key in self._recency:  # collected first: O(what is skipped + what goes), no copy
            if excess <= 0:
                break
            scope, aid = key
            if key not in keep and not self._leases.pinned(scope, aid):
                victims.append(key)
                excess -= self._scopes[scope][aid].size
        for scope, aid in victims:
            self._remove(scope, aid)

    def _sweep_if_due(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + self._sweep_interval
        self._ledger.forget_full_buckets(now)
        for scope in list(self._scopes):
            self._drop_expired(scope, now)

    def _drop_expired(self, scope: str, now: float) -> None:
        entries = self._scopes[scope]
        for aid in [aid for aid, entry in entries.items() if entry.expires_at <= now]:
            self._remove(scope, aid)

    def _prune_owner(self, owner: str, now: float) -> None:
        """Drop the expired artifacts of `owner`'s scopes (before its live bytes refuse a write:
        only expired artifacts that nobody read or swept since still count)."""
        for scope in [s for s in self._scopes if budget_owner(s) == owner]:
            self._drop_expired(scope, now)
