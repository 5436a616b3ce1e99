"""Frozen summaries: what stands for a span of dropped turns is written once and reused.

A summary (extracted or written by a summarizer) is kept in the store under the digest of the
span it covers, the query it was made for and the summarizer's identity (kind, model, budget,
prompt version), in a scope of its own beside the tenant's artifacts (the read tools never see
it). The next request with the same history finds the same bytes there and sends them again
(prefix stable), without calling the summarizer. Whatever goes wrong (expired, store down, a
damaged entry) counts as no entry: the caller makes the summary again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.artifacts.budgets import sub_scope
from proxy.artifacts.store import ArtifactStore, NewArtifact, StoreUnavailable
from proxy.engine.wire import WireFormat
from proxy.errors import ProxyError
from proxy.jsonio import dumps, loads

KIND = "summary"
_log = logging.getLogger("ctxproxy.summaries")


def summaries_scope(scope: str) -> str:
    return sub_scope(scope, "summaries")


@dataclass(frozen=True)
class Summary:
    """The body of a summary (the header naming the archive is written around it) and where it
    came from."""

    body: str
    by: str
    """`extract`, or the summarizer's model."""
    usage: dict[str, int] = field(default_factory=dict)
    """The summarizer's token usage when it was written (empty for an extract)."""


def span_digest(wire: WireFormat, items: Sequence[Any], identity: str, query: str) -> str:
    """The key of a summary: who makes it (`identity`), for which query, of which items."""
    digest = hashlib.sha256()
    for part in (identity.encode(), query.encode(), *(wire.canonical(item) for item in items)):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


async def lookup(store: ArtifactStore, scope: str, key: str) -> Summary | None:
    own = summaries_scope(scope)
    try:
        found = await store.get(own, store.artifact_id(own, key))
    except StoreUnavailable:
        return None
    return None if found is None else _decode(found.content)


async def keep(
    store: ArtifactStore, scope: str, key: str, summary: Summary, *, ttl_seconds: int,
    max_per_scope: int,
) -> bool:
    """Freeze `summary` under `key`; False when the store did not confirm it."""
    own = summaries_scope(scope)
    artifact_id = store.artifact_id(own, key)
    entry = {"summary": summary.body, "by": summary.by, "spent": summary.usage}
    item = NewArtifact(content=dumps(entry).decode(), kind=KIND)
    try:
        stored = await store.put_many(
            own, {artifact_id: item}, ttl_seconds=ttl_seconds, max_per_scope=max_per_scope
        )
    except Exception:  # a summary not frozen is made again next time: never an error here
        _log.warning("a summary could not be kept", exc_info=True)
        return False
    return artifact_id in stored


def _decode(content: str) -> Summary | None:
    try:
        value = loads(content)
    except ProxyError:
        return None
    if not isinstance(value, dict):
        return None
    body, by, usage = value.get("summary"), value.get("by"), value.get("spent")
    if not isinstance(body, str) or not isinstance(by, str) or not isinstance(usage, dict):
        return None
    counts = {k: v for k, v in usage.items() if isinstance(k, str) and type(v) is int}
    return Summary(body, by, counts)
