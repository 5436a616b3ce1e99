"""Know when the provider's prompt cache is cold.

A provider keeps a sent prompt's prefix cached for a while after its last use (`upstreams[].
prompt_cache`, or longer when the request's own marks ask: `WireFormat.cache_ttl`). While a
conversation's prefix is cached, a cut that changes the prompt near its start costs that cache,
so cuts keep the prefix (`cut_memory`, growth-sized cuts). Once the cache has expired there is
nothing left to keep: the next cut that is due may go to the target (and a summary may roll up)
at no cache cost, which makes this prompt and the next ones smaller.

So every call that goes upstream leaves the time it was sent, keyed by the digest of its history
as it came (the working set's and the cut memory's key, in their scope), and the next request of
the conversation reads it at its most recent answers in the same store round trip as theirs. A
replica that did not send it reads the same record. The record lives a little longer than the
lifetime it was sent under; an expired record is no record: the cache is cold either way.

Records are written once (ids are content-addressed): a history sent twice keeps the time of its
first sending, which can only make the cache look colder than it is.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from proxy.artifacts.store import Artifact, ArtifactStore, NewArtifact
from proxy.engine.working_set import WorkingSetKey, working_set_scope
from proxy.errors import ProxyError
from proxy.jsonio import dumps, loads

KIND = "sent"
VERSION = 1
RECENT_ANSWERS = 4
"""Answers (the most recent) at which the time a history was sent is looked for."""
RECORD_MARGIN_SECONDS = 300
"""How much longer than the cache lifetime a record is kept (the age is judged by the clock)."""

_log = logging.getLogger("ctxproxy.cache_warmth")


class CacheState(StrEnum):
    """The manifest's `cache.state`."""

    warm = "warm"
    """The conversation's prompt was sent within the cache lifetime."""
    cold = "cold"
    """No record of it being sent (or an expired one), sent longer ago than the lifetime, or an
    upstream that caches nothing (lifetime 0)."""
    unknown = "unknown"
    """No lifetime is known (null, or no upstream), or the store did not answer: treated as
    warm (cuts keep the prefix)."""


class CacheApplied(StrEnum):
    """The manifest's `cache.applied`: what the cache's state changed in this request."""

    none = "none"
    """No new cut was due (under the trigger, or the remembered cuts keep it under)."""
    keep_prefix = "keep_prefix"
    """A cut was due and planned as ever: earlier cuts kept, the new one growth-sized (the cache
    warm or unknown; or cold without remembered cuts, when there is nothing to give up)."""
    deeper_cut = "deeper_cut"
    """A cut was due, the cache cold: planned afresh, one cut to the target (a summary rolls
    up at once)."""


@dataclass(frozen=True)
class Warmth:
    """What is known of a conversation's cached prefix when a request comes."""

    state: CacheState
    age_seconds: float | None
    """Since the conversation's prompt was last sent (None: no record)."""
    ttl_seconds: int | None

    @property
    def cold(self) -> bool:
        return self.state is CacheState.cold


NO_WARMTH = Warmth(CacheState.unknown, None, None)


def resolve_ttl(configured: int | None, marked: int | None) -> int | None:
    """The lifetime that applies: the upstream's for the model, or longer when the request's own
    marks ask for longer. 0 (caches nothing) and None (unknown) are the operator's word."""
    if not configured:
        return configured
    return max(configured, marked or 0)


def judge(last_sent: float | None, now: float, ttl: int | None, read: bool) -> Warmth:
    """`read`: the store answered (else nothing is known of the record)."""
    age = None if last_sent is None else round(max(now - last_sent, 0.0), 3)
    if ttl is None or not read:
        return Warmth(CacheState.unknown, age, ttl)
    warm = ttl > 0 and age is not None and age <= ttl
    return Warmth(CacheState.warm if warm else CacheState.cold, age, ttl)


def record_id(store: ArtifactStore, scope: str, digest: str) -> str:
    return store.artifact_id(working_set_scope(scope), f"{KIND}\x00{digest}")


def sent_ids(store: ArtifactStore, scope: str, anchors: Mapping[int, str]) -> list[str]:
    """The records to look for: the histories before the most recent answers (the previous
    requests of the conversation). Not the request's own: a retry, or a token count after the
    call, must decide as the call did."""
    return [record_id(store, scope, anchors[i]) for i in sorted(anchors)[-RECENT_ANSWERS:]]


def last_sent(ids: Sequence[str], found: Mapping[str, Artifact]) -> float | None:
    """The latest time among the records found (None: none, or none readable)."""
    times = [t for i in ids if i in found and (t := _decode(found[i].content)) is not None]
    return max(times, default=None)


def _decode(content: str) -> float | None:
    try:
        data = loads(content)
    except ProxyError:
        return None
    at = data.get("at") if isinstance(data, dict) and data.get("v") == VERSION else None
    if isinstance(at, (int, float)) and not isinstance(at, bool) and math.isfinite(at):
        return float(at)
    return None


def sent_key(place: WorkingSetKey, ttl: int | None) -> WorkingSetKey | None:
    """Where the time this request goes upstream is kept (None: a lifetime of 0 or unknown
    makes the record useless)."""
    if not ttl:
        return None
    return WorkingSetKey(place.scope, place.digest, ttl + RECORD_MARGIN_SECONDS,
                         place.max_per_scope)  # fmt: skip


async def note_sent(store: ArtifactStore, key: WorkingSetKey, at: float) -> bool:
    """Keep the time `at` the request of history `key.digest` went upstream. A failure is
    logged, never raised: the answer is the client's already."""
    own = working_set_scope(key.scope)
    artifact_id = record_id(store, key.scope, key.digest)
    item = NewArtifact(content=dumps({"v": VERSION, "at": at}).decode(), kind=KIND)
    try:
        stored = await store.put_many(
            own, {artifact_id: item}, ttl_seconds=key.ttl_seconds, max_per_scope=key.max_per_scope
        )
    except Exception:  # never fail an answer here
        _log.warning("the time a request was sent could not be kept", exc_info=True)
        return False
    return artifact_id in stored
