"""Artifacts keyed by the id the store computes for them, as `put_many` takes them."""

from __future__ import annotations

from typing import Protocol

from proxy.artifacts.store import NewArtifact


class Ids(Protocol):
    def artifact_id(self, scope: str, content: str) -> str: ...


def keyed(store: Ids, scope: str, *items: NewArtifact) -> dict[str, NewArtifact]:
    """`{store.artifact_id(scope, item.content): item}` in order (the first of equal contents)."""
    out: dict[str, NewArtifact] = {}
    for item in items:
        out.setdefault(store.artifact_id(scope, item.content), item)
    return out
