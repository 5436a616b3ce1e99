"""The working set: the proxy's own read rounds, kept so that the next turn still has them.

The client's history never contains the synthetic exchanges (the calls of the read tools and the
pages they returned). So that the model does not re-read the same pages every turn, and so that
the next prompt starts with the bytes the upstream saw last, the exchanges of a request are kept
in the store under a key made of the client's history as it came (`canonical` items, so an SDK's
re-serialisation does not change it). When a later request's history holds that same history
followed by the model's answer, the exchanges are put back just before that answer: exactly where
they happened. Re-inserted exchanges are ordinary tool exchanges for the policy.

Entries live in a scope of their own beside the tenant's artifacts (the read tools never see
them), with the policy's TTL and cap. An entry is written once: a retried request keeps the first
one. Whatever goes wrong (expired, store down) the request goes on as if there were none.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.artifacts.budgets import sub_scope
from proxy.artifacts.store import Artifact, ArtifactStore, NewArtifact, StoreUnavailable
from proxy.engine.wire import WireFormat
from proxy.errors import ProxyError
from proxy.jsonio import dumps, loads

KIND = "working_set"
MAX_ANCHORS = 256
"""Answers looked up per request (the most recent ones): one store round trip for all."""

_log = logging.getLogger("ctxproxy.working_set")


def working_set_scope(scope: str) -> str:
    return sub_scope(scope, "working-set")


@dataclass(frozen=True)
class WorkingSetKey:
    """Where a request's synthetic exchanges are kept: its scope and the digest of its history."""

    scope: str
    digest: str
    ttl_seconds: int
    max_per_scope: int


@dataclass(frozen=True)
class Reinserted:
    items: list[Any]
    exchanges: int
    """How many kept exchanges were put back (0: `items` is the request's own list)."""
    unavailable: bool = False
    """The store did not answer: nothing was put back."""
    at: dict[int, int] = field(default_factory=dict)
    """The answer (an index into the request's own items) each exchange went back before, and
    how many items it added there."""

    def moved(self, index: int) -> tuple[int, int]:
        """Where the request's own item at `index` stands now, and how many exchanges went back
        before it."""
        before = [added for at, added in self.at.items() if at < index]
        return index + sum(before), len(before)


def history_digest(wire: WireFormat, items: Sequence[Any]) -> str:
    """The key of a history: its items' canonical bytes, each length-prefixed."""
    digest = hashlib.sha256()
    for item in items:
        _add(digest, wire.canonical(item))
    return digest.hexdigest()


def _add(digest: Any, data: bytes) -> None:
    digest.update(len(data).to_bytes(8, "big"))
    digest.update(data)


def working_set_place(
    wire: WireFormat, items: Sequence[Any], scope: str, ttl_seconds: int, max_per_scope: int
) -> tuple[WorkingSetKey, dict[int, str]]:
    """Where a request's read rounds are kept (its history's key) and where earlier ones may go
    back (`answer_anchors`), in one pass over its items."""
    anchors, digest = history_digests(wire, items)
    return WorkingSetKey(scope, digest, ttl_seconds, max_per_scope), anchors


def answer_anchors(wire: WireFormat, items: Sequence[Any]) -> dict[int, str]:
    """Index of each recent answer -> the digest of the history before it."""
    return history_digests(wire, items)[0]


def history_digests(wire: WireFormat, items: Sequence[Any]) -> tuple[dict[int, str], str]:
    """(`answer_anchors`, `history_digest`) in one pass over the items."""
    answers = [i for i, item in enumerate(items) if wire.is_answer(item)][-MAX_ANCHORS:]
    wanted = set(answers)
    anchors: dict[int, str] = {}
    digest = hashlib.sha256()
    for index, item in enumerate(items):
        if index in wanted:
            anchors[index] = digest.hexdigest()
        _add(digest, wire.canonical(item))
    return anchors, digest.hexdigest()


async def reinsert(
    store: ArtifactStore,
    scope: str,
    wire: WireFormat,
    items: list[Any],
    anchors: dict[int, str] | None = None,
) -> Reinserted:
    """`items` with every kept exchange put back before the answer it preceded (`anchors`:
    the items' `answer_anchors`, when the caller has them)."""
    anchors = answer_anchors(wire, items) if anchors is None else anchors
    if not anchors:
        return Reinserted(items, 0)
    ids = exchange_ids(store, scope, anchors)
    try:
        found = await store.get_many(working_set_scope(scope), list(ids.values()))
    except StoreUnavailable:
        return Reinserted(items, 0, unavailable=True)
    return put_back(wire, items, ids, found)


def exchange_ids(store: ArtifactStore, scope: str, anchors: dict[int, str]) -> dict[int, str]:
    """Anchor index -> the id its kept exchange would have (in `working_set_scope(scope)`)."""
    own = working_set_scope(scope)
    return {index: store.artifact_id(own, digest) for index, digest in anchors.items()}


def put_back(
    wire: WireFormat, items: list[Any], ids: dict[int, str], found: Mapping[str, Artifact]
) -> Reinserted:
    """`items` with the kept exchanges `found` (by id, `exchange_ids`) put back in place."""
    out = list(items)
    at: dict[int, int] = {}
    for index in sorted(ids, reverse=True):  # from the end: earlier indices stay valid
        artifact = found.get(ids[index])
        exchange = _exchange(artifact.content) if artifact is not None else None
        if exchange:
            shared = _already_sent(wire, exchange, out, index)
            out[index + shared : index + shared] = exchange[shared:]
            at[index] = len(exchange) - shared
    return Reinserted(out if at else items, len(at), at=at)


def _already_sent(wire: WireFormat, exchange: list[Any], items: list[Any], start: int) -> int:
    """How many leading items of `exchange` the client sent again at `start`: the answer items it
    saw from a read round (text or reasoning streamed before the proxy's call) come back with its
    history; they are not repeated, the rest of the exchange goes in after them."""
    shared = 0
    while (
        shared < len(exchange) - 1
        and start + shared < len(items)
        and wire.canonical(exchange[shared]) == wire.canonical(items[start + shared])
    ):
        shared += 1
    return shared


def working_set_notes(kept: Reinserted) -> list[str]:
    """What the manifest says about the working set of a request."""
    if kept.unavailable:
        return ["working set: the store did not answer; earlier read rounds are left out"]
    if kept.exchanges:
        return [f"working set: {kept.exchanges} exchange(s) of the read tools put back in place"]
    return []


def _exchange(content: str) -> list[Any] | None:
    try:
        value = loads(content)
    except ProxyError:  # a damaged entry is no entry
        return None
    return value if isinstance(value, list) and value else None


async def remember(store: ArtifactStore, key: WorkingSetKey, exchange: list[Any]) -> bool:
    """Keep `exchange` (the synthetic calls and their results, as sent) for the next turn."""
    if not exchange:
        return False
    own = working_set_scope(key.scope)
    artifact_id = store.artifact_id(own, key.digest)
    item = NewArtifact(content=dumps(exchange).decode(), kind=KIND)
    try:
        stored = await store.put_many(
            own, {artifact_id: item}, ttl_seconds=key.ttl_seconds, max_per_scope=key.max_per_scope
        )
    except Exception:  # the answer is already the client's: never fail it here
        _log.warning("the working set could not be kept", exc_info=True)
        return False
    return artifact_id in stored
