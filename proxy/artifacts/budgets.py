"""Write budgets of the artifact stores: how many bytes a tenant may write per minute, and how
many it may hold live, so that one tenant cannot fill a store that others share.

A budget belongs to the *owner* of a scope: the tenant's scope without its session and without a
sub-scope (`budget_owner`), so the sessions a tenant names, its working set and its summaries all
draw on one budget. Both stores apply the same rule (`MemoryStore` here in Python, `RedisStore`
in one Lua script, `redis_budgets`): the items of a `put_many` that are not stored yet are taken
in order; one is refused when the owner's live bytes plus its size would exceed `live_bytes`, or
when its size exceeds what the owner's rate bucket holds (a bucket of `bytes_per_minute`, refilled
at that rate: a burst of one minute's budget, then the rate). A refused item is not stored and is
left out of the confirmed ids, which every caller already handles (the content stays where it
is); later, smaller items of the same batch may still fit. Refreshing an artifact that is stored
already is never refused: it adds no bytes. An item counts its content's UTF-8 bytes.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from proxy.jsonio.slices import LONG_CHARS, utf8_slices
from proxy.settings import SESSION_SCOPE_MARK

SUB_SCOPE_MARK = "\x00"
"""Between a scope and the name of a scope derived from it (the working set, the summaries)."""
LOG_EVERY_S = 60.0
"""One log line per owner and budget at most this often."""
MAX_LOGGED_OWNERS = 10_000


class WriteLimit(StrEnum):
    """Which budget refused a write (the metrics label, the manifest note)."""

    live_bytes = "live_bytes"
    bytes_per_minute = "bytes_per_minute"


@dataclass(frozen=True)
class WriteBudget:
    """One owner's limits; None: no limit of that kind."""

    bytes_per_minute: int | None = None
    live_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("bytes_per_minute", "live_bytes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0 or None, got {value}")

    @property
    def limited(self) -> bool:
        return self.bytes_per_minute is not None or self.live_bytes is not None

    def limit(self, budget: WriteLimit) -> int:
        value = self.live_bytes if budget is WriteLimit.live_bytes else self.bytes_per_minute
        return 0 if value is None else value


UNLIMITED = WriteBudget()


@dataclass(frozen=True)
class WriteBudgets:
    """The budget of every owner: its own (`owners`, by owner scope) or the `default`."""

    default: WriteBudget = UNLIMITED
    owners: Mapping[str, WriteBudget] = field(default_factory=dict)

    def of(self, owner: str) -> WriteBudget:
        return self.owners.get(owner, self.default)


def sub_scope(scope: str, name: str) -> str:
    """The scope named `name` derived from `scope` (its writes count against `scope`'s owner)."""
    return f"{scope}{SUB_SCOPE_MARK}{name}"


def budget_owner(scope: str) -> str:
    """The scope whose budgets `scope`'s writes draw on: without a sub-scope, without a session."""
    return scope.partition(SUB_SCOPE_MARK)[0].partition(SESSION_SCOPE_MARK)[0]


def counted_bytes(content: str) -> int:
    """What an artifact counts against the budgets: its content's UTF-8 bytes."""
    if content.isascii():
        return len(content)
    if len(content) >= LONG_CHARS:  # a slice at a time: one encode holds the GIL for it all
        return sum(map(len, utf8_slices(content)))
    return len(content.encode("utf-8", "surrogatepass"))


def refilled(tokens: float, at: float, now: float, per_minute: int) -> float:
    """What a rate bucket holds at `now`, holding `tokens` at `at` (never more than a minute's)."""
    return min(float(per_minute), tokens + max(0.0, now - at) * per_minute / 60.0)


def owner_tag(owner: str) -> str:
    """A name for an owner fit for a log line (a digest: a scope may hash a credential)."""
    return hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:12]


@dataclass(frozen=True)
class Refused:
    """The writes of one `put_many` that one budget refused."""

    budget: WriteLimit
    limit: int
    writes: int
    bytes: int


class Confirmed(set[str]):
    """What `put_many` answers: the ids whose write is confirmed (a set, as the protocol says),
    plus `refused`, the writes the owner's budgets refused (none: nothing was refused)."""

    def __init__(self, ids: Iterable[str] = (), refused: Iterable[Refused] = ()) -> None:
        super().__init__(ids)
        self.refused = tuple(refused)


def budget_refusals(confirmed: set[str]) -> tuple[Refused, ...]:
    """The budget refusals a `put_many` answer carries (none from a store without budgets)."""
    return confirmed.refused if isinstance(confirmed, Confirmed) else ()


class Tally:
    """The refusals of one `put_many`, by budget."""

    def __init__(self, budget: WriteBudget) -> None:
        self._budget = budget
        self._counts: dict[WriteLimit, tuple[int, int]] = {}

    def add(self, budget: WriteLimit, size: int) -> None:
        writes, total = self._counts.get(budget, (0, 0))
        self._counts[budget] = (writes + 1, total + size)

    def refusals(self) -> tuple[Refused, ...]:
        return tuple(
            Refused(budget, self._budget.limit(budget), writes, total)
            for budget, (writes, total) in self._counts.items()
        )


class RefusalRecorder:
    """A store's count of the writes and bytes its budgets refused (read by /metrics at scrape
    time), and its log lines: one per owner and budget per `LOG_EVERY_S` at most."""

    def __init__(self, logger: logging.Logger, clock: Callable[[], float]) -> None:
        self._log = logger
        self._clock = clock
        self._counts: dict[WriteLimit, tuple[int, int]] = {}
        self._logged: dict[tuple[str, WriteLimit], float] = {}

    def snapshot(self) -> dict[WriteLimit, tuple[int, int]]:
        """Writes and bytes refused since start, by budget."""
        return dict(self._counts)

    def record(self, owner: str, refused: Iterable[Refused]) -> None:
        now = self._clock()
        for item in refused:
            writes, total = self._counts.get(item.budget, (0, 0))
            self._counts[item.budget] = (writes + item.writes, total + item.bytes)
            if now < self._logged.get((owner, item.budget), float("-inf")) + LOG_EVERY_S:
                continue
            if len(self._logged) >= MAX_LOGGED_OWNERS:
                self._logged.clear()
            self._logged[(owner, item.budget)] = now
            self._log.warning(
                "write budget reached: scope %s, %s %d: %d write(s) of %d bytes refused "
                "(further refusals of this budget for this scope are not logged for %ds)",
                owner_tag(owner), item.budget.value, item.limit, item.writes, item.bytes,
                int(LOG_EVERY_S),
            )  # fmt: skip


class Ledger:
    """The memory store's accounting per owner: live bytes and rate buckets."""

    def __init__(self) -> None:
        self._live: dict[str, int] = {}
        self._buckets: dict[str, tuple[float, float]] = {}

    def live(self, owner: str) -> int:
        return self._live.get(owner, 0)

    def added(self, owner: str, size: int) -> None:
        if size:
            self._live[owner] = self._live.get(owner, 0) + size

    def removed(self, owner: str, size: int) -> None:
        if not size:
            return
        left = self._live.get(owner, 0) - size
        if left > 0:
            self._live[owner] = left
        else:
            self._live.pop(owner, None)

    def refusal(
        self, owner: str, budget: WriteBudget, size: int, now: float, prune: Callable[[], None]
    ) -> WriteLimit | None:
        """The budget that refuses writing `size` bytes now, or None (then the bytes are taken
        from the owner's rate bucket; the caller adds them to its live bytes once stored).
        `prune` drops the owner's expired artifacts, when the live bytes alone would refuse."""
        if budget.live_bytes is not None and self.live(owner) + size > budget.live_bytes:
            prune()
            if self.live(owner) + size > budget.live_bytes:
                return WriteLimit.live_bytes
        if budget.bytes_per_minute is not None:
            tokens, at = self._buckets.get(owner, (float(budget.bytes_per_minute), now))
            tokens = refilled(tokens, at, now, budget.bytes_per_minute)
            if size > tokens:
                self._buckets[owner] = (tokens, now)
                return WriteLimit.bytes_per_minute
            self._buckets[owner] = (tokens - size, now)
        return None

    def forget_full_buckets(self, now: float) -> None:
        """Drop the buckets idle for a minute (full again: the same as no bucket)."""
        self._buckets = {o: (t, at) for o, (t, at) in self._buckets.items() if now - at < 60.0}

    def clear(self) -> None:
        self._live.clear()
        self._buckets.clear()
