"""What a conversation's earlier requests left for this one, fetched in one store round trip:
the working set's exchanges (`working_set`), the cuts they made (`cut_memory`) and when they went
upstream (`cache_warmth`); and, once this request is prepared, its own cuts kept for the next
one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy.artifacts.store import ArtifactStore, StoreUnavailable
from proxy.engine.cache_warmth import last_sent, sent_ids
from proxy.engine.conversation import Unit
from proxy.engine.cut_memory import (
    CutRecord,
    Recalled,
    aligned,
    policy_fingerprint,
    recall,
    record_ids,
    remember,
)
from proxy.engine.planner import Pinned, ReplayLog
from proxy.engine.policy import Policy
from proxy.engine.wire import WireFormat
from proxy.engine.working_set import (
    Reinserted,
    WorkingSetKey,
    exchange_ids,
    put_back,
    working_set_place,
    working_set_scope,
)


@dataclass
class History:
    """What the earlier requests of this request's conversation left for it."""

    kept: Reinserted
    """The request's items with the working set's exchanges put back."""
    working_set: WorkingSetKey | None = None
    """Where this request's read rounds are kept (None: the policy keeps none)."""
    cuts_key: WorkingSetKey | None = None
    """Where this request's cuts are kept for the next one (None: not kept)."""
    recalled: Recalled | None = None
    """The cuts remembered for the history before it, when they apply."""
    fingerprint: str = ""
    place: WorkingSetKey | None = None
    """The key of this request's history (where the time it goes upstream is kept)."""
    last_sent: float | None = None
    """When the conversation's prompt last went upstream (`cache_warmth`; None: no record)."""
    sent_read: bool = False
    """Whether that is known: the store answered (or there was nothing to look for)."""

    def pinned(self, units: list[Unit]) -> Pinned | None:
        """The remembered moves, when their units are this request's first ones and they moved
        anything."""
        if self.recalled is None or not self.recalled.record.moves:
            return None
        record = self.recalled.record
        return record.pinned() if aligned(units, record) else None

    @property
    def pins(self) -> bool:
        """Whether remembered moves may apply (the request is then prepared even under its
        trigger: its earlier cuts stand)."""
        return self.recalled is not None and self.recalled.record.moves

    @property
    def relaxed(self) -> int:
        """The last resort's level the remembered form was sent at (0: none)."""
        return self.recalled.record.relaxed if self.pins and self.recalled is not None else 0

    @property
    def recent_end(self) -> int | None:
        """Where "recent" ended for the remembered last resort (None: none is kept)."""
        if not self.relaxed or self.recalled is None:
            return None
        return self.recalled.record.recent_end or self.recalled.record.units

    def cut_since(self, log: ReplayLog) -> bool:
        """Whether a replay cut anything after the remembered units (a new cut was due)."""
        return log.cut_from(self.recalled.record.units if self.recalled is not None else 0)

    def sizing(self, allowance: int) -> int:
        """The allowance the steps size their texts by: the one the remembered cuts were made
        with, else this request's."""
        return self.recalled.record.sizing if self.recalled is not None else allowance


async def recall_history(
    store: ArtifactStore,
    scope: str,
    wire: WireFormat,
    items: list[Any],
    policy: Policy,
    first_call: bool,
    keep: bool = True,
) -> History:
    """The working set's exchanges put back in `items` (when the policy keeps them), the
    cuts remembered for the history and when its conversation's prompt last went upstream
    (`cache_warmth`), for the client's own request (`first_call`) under a reducing policy;
    nothing else. `keep`: this request's own cuts are kept for the next one
    (`History.cuts_key`)."""
    if not (first_call and policy.reduces):
        return History(Reinserted(items, 0))
    limits, read = policy.artifacts, policy.read_tool
    place, anchors = working_set_place(wire, items, scope, limits.ttl_seconds, limits.max_per_scope)
    working_set = place if read.enabled and read.working_set else None
    key = place if keep else None
    if not anchors:  # a conversation's first request: nothing was sent before it
        return History(Reinserted(items, 0), working_set, key, place=place, sent_read=True)
    exchanges = exchange_ids(store, scope, anchors) if working_set is not None else {}
    records = record_ids(store, scope, anchors)
    sent = sent_ids(store, scope, anchors)
    try:
        wanted = [*exchanges.values(), *records.values(), *sent]
        found = await store.get_many(working_set_scope(scope), wanted)
    except StoreUnavailable:
        kept = Reinserted(items, 0, unavailable=bool(exchanges))
        return History(kept, working_set, key, place=place)
    kept = put_back(wire, items, exchanges, found) if exchanges else Reinserted(items, 0)
    history = History(kept, working_set, key, place=place, last_sent=last_sent(sent, found),
                      sent_read=True)  # fmt: skip
    if any(i in found for i in records.values()):
        history.fingerprint = policy_fingerprint(policy)
        history.recalled = recall(records, found, kept, history.fingerprint)
    return history


@dataclass(frozen=True)
class Made:
    """What a prepared request decided, for its record."""

    policy: Policy
    items: int
    units: int
    sizing: int
    log: ReplayLog
    sent: bool
    """Whether the reduction went upstream (else the request as it came)."""
    slack: int
    relaxed: int = 0
    """The last resort's level it went at."""
    recent_end: int = 0
    """Where "recent" ended for that last resort."""


async def keep_cuts(store: ArtifactStore, history: History, made: Made) -> bool:
    """Keep what this request decided for the next one of its conversation: its moves when its
    reduction was sent, none when it went as it came (which supersedes a remembered record)."""
    if history.cuts_key is None:
        return False
    log = made.log
    cuts = log.cuts if made.sent else [[] for _ in log.cuts]
    seen = log.seen if made.sent else [[] for _ in log.seen]
    record = CutRecord(
        history.fingerprint or policy_fingerprint(made.policy), made.items,
        history.kept.exchanges, made.units, made.sizing, made.slack if made.sent else 0,
        cuts, seen, made.relaxed if made.sent else 0, made.recent_end if made.sent else 0,
    )  # fmt: skip
    if not record.moves and not history.pins:
        return False  # nothing to pin, nothing to supersede
    return await remember(store, history.cuts_key, record)
