"""Cuts that stay put: the moves each request of a conversation made, remembered so that the next
request of that conversation makes them again, whatever its budget is by then.

The planner's replay reproduces old cuts only while the budget stays the same, and it does not:
the count ratio (calibration) moves after every answer, a client changes its output limit or its
tools. A replay under another budget cuts the old part elsewhere and rewrites the prompt near its
start, which costs the provider's prompt cache. So the moves a reduced request made (each step's
cuts and eager moves, by time point), the allowance its step texts were sized for (a summary's
budget, its roll-up threshold) and how much its plan over-counted it are kept under the digest of
its history as it came; the next request of the conversation (that history, the answer, what
follows) finds them at that answer, replays them as they were over those units, and plans only
the units after them under its own budget. The old cuts then stay put until a new one is due.

Like the working set (and in its scope, fetched in the same round trip): keyed by the client's
items as they came (`WireFormat.canonical`), written once, the policy's TTL and cap. A record
made under other step settings, over other put-back exchanges, damaged, expired, or a store that
does not answer: the request is planned as if there were none.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.artifacts.store import Artifact, ArtifactStore, NewArtifact
from proxy.engine.conversation import Unit
from proxy.engine.planner import Move, Pinned
from proxy.engine.policy import Policy
from proxy.engine.working_set import Reinserted, WorkingSetKey, working_set_scope
from proxy.errors import ProxyError
from proxy.jsonio import dumps, loads

KIND = "cuts"
VERSION = 1
KEYS = ("items", "exchanges", "units", "sizing", "slack", "relaxed", "recent_end")
"""A record's numbers (all >= 0)."""
RECENT_ANSWERS = 32
"""Answers (the most recent) at which a remembered record is looked for."""

_log = logging.getLogger("ctxproxy.cut_memory")


@dataclass(frozen=True)
class CutRecord:
    """What one prepared request of a conversation decided over its units."""

    policy: str
    """`policy_fingerprint` of the policy it was planned under."""
    items: int
    """The items it was prepared from (its own, plus the exchanges put back)."""
    exchanges: int
    """Exchanges of the working set put back among them."""
    units: int
    """The units those items hold (the time points the moves cover)."""
    sizing: int
    """The allowance its step texts were sized for (`PrepareContext.sizing`)."""
    slack: int
    """Its planned tokens minus the tokens it had (`planner.Pinned.slack`)."""
    cuts: list[list[Move]]
    seen: list[list[Move]]
    relaxed: int = 0
    """The last resort's level it was sent at (0: none): the next request reproduces that form
    until a new cut is due."""
    recent_end: int = 0
    """Where "recent" ended for that last resort (`PrepareContext.recent_end`)."""

    def pinned(self) -> Pinned:
        return Pinned(self.units, self.cuts, self.seen, self.slack)

    @property
    def moves(self) -> bool:
        """Whether it moved anything (a record without moves pins nothing)."""
        return any(self.cuts) or any(self.seen)

    def encode(self) -> str:
        return dumps(
            {
                "v": VERSION, "policy": self.policy, "items": self.items,
                "exchanges": self.exchanges, "units": self.units, "sizing": self.sizing,
                "slack": self.slack, "cuts": self.cuts, "seen": self.seen,
                "relaxed": self.relaxed, "recent_end": self.recent_end,
            }
        ).decode()  # fmt: skip

    @classmethod
    def decode(cls, content: str) -> CutRecord | None:
        """The record, or None for anything damaged or of another version."""
        try:
            data = loads(content)
            if not isinstance(data, dict) or data.get("v") != VERSION:
                return None
            ints = [data[k] for k in KEYS]
            if not all(isinstance(n, int) and n >= 0 for n in ints) or not isinstance(
                data["policy"], str
            ):
                return None
            cuts, seen = _moves(data["cuts"]), _moves(data["seen"])
        except (ProxyError, KeyError, TypeError, ValueError):
            return None
        if cuts is None or seen is None or len(cuts) != len(seen):
            return None
        items, exchanges, units, sizing, slack, relaxed, recent_end = ints
        return cls(
            data["policy"], items, exchanges, units, sizing, slack, cuts, seen, relaxed, recent_end
        )


def _moves(value: Any) -> list[list[Move]] | None:
    if not isinstance(value, list):
        return None
    out: list[list[Move]] = []
    for step in value:
        if not isinstance(step, list):
            return None
        moves = [(int(t), int(h)) for t, h in step if isinstance(t, int) and isinstance(h, int)]
        if len(moves) != len(step):
            return None
        out.append(moves)
    return out


def policy_fingerprint(policy: Policy) -> str:
    """What a record depends on besides the history: the mode, the steps and their settings,
    what is protected, whether the read tool is named, what the store keeps. The budget is left
    out on purpose: the moves must outlast a change of it."""
    fields = {"mode", "protect", "steps", "read_tool", "artifacts"}
    data = policy.model_dump(mode="json", include=fields)
    data["read_tool"] = data["read_tool"]["enabled"]
    data["artifacts"] = data["artifacts"]["max_chars"]
    return hashlib.sha256(dumps(data)).hexdigest()[:32]


def record_id(store: ArtifactStore, scope: str, digest: str) -> str:
    """The id of the record kept for the history of digest `digest` (`history_digest`)."""
    return store.artifact_id(working_set_scope(scope), f"{KIND}\x00{digest}")


def record_ids(store: ArtifactStore, scope: str, anchors: Mapping[int, str]) -> dict[int, str]:
    """Anchor index -> the id of the record kept for the history before it (the most recent
    `RECENT_ANSWERS` answers)."""
    recent = sorted(anchors)[-RECENT_ANSWERS:]
    return {index: record_id(store, scope, anchors[index]) for index in recent}


@dataclass(frozen=True)
class Recalled:
    """The remembered record that applies to a request, and what it covers there."""

    record: CutRecord
    anchor: int
    """The index (in the request's own items) of the answer the record was found at."""


def recall(
    ids: Mapping[int, str],
    found: Mapping[str, Artifact],
    kept: Reinserted,
    fingerprint: str,
) -> Recalled | None:
    """The record of the most recent answer that still applies: made under the same step
    settings, over the same put-back exchanges (the same items where the request has them now;
    `aligned` checks its units once the request is parsed)."""
    for anchor in sorted(ids, reverse=True):
        artifact = found.get(ids[anchor])
        record = CutRecord.decode(artifact.content) if artifact is not None else None
        if record is None or record.policy != fingerprint:
            continue
        if kept.moved(anchor) != (record.items, record.exchanges):
            continue
        return Recalled(record, anchor)
    return None


def aligned(units: list[Unit], record: CutRecord) -> bool:
    """Whether the record's units are the request's first units, ending at its items."""
    if record.units > len(units):
        return False
    ends = units[record.units - 1].end if record.units else 0
    follows = record.units == len(units) or units[record.units].start >= record.items
    return (record.units == 0 or ends <= record.items) and follows


async def remember(store: ArtifactStore, key: WorkingSetKey, record: CutRecord) -> bool:
    """Keep `record` for the next request of the conversation (`key.digest`: this request's
    history as it came). A failure is logged, never raised: the request goes on."""
    own = working_set_scope(key.scope)
    artifact_id = record_id(store, key.scope, key.digest)
    item = NewArtifact(content=record.encode(), kind=KIND)
    try:
        stored = await store.put_many(
            own, {artifact_id: item}, ttl_seconds=key.ttl_seconds, max_per_scope=key.max_per_scope
        )
    except Exception:  # the request is prepared: never fail it here
        _log.warning("the cuts of a request could not be kept", exc_info=True)
        return False
    return artifact_id in stored
