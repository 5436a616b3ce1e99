"""The store as a request without a credential sees it: reads as usual, no write ever confirmed.

Such a request's scope is its own and lives for that request only: what it stored could never be
read back, and anyone who reaches the port could fill the store with it. With no write confirmed,
every step keeps the content where it is (the rule for a store that does not confirm a write),
and nothing is claimed for work in the background.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from proxy.artifacts.store import Artifact, ArtifactStore, NewArtifact


class NoWritesStore:
    """`store` that confirms no write and claims nothing."""

    def __init__(self, store: ArtifactStore) -> None:
        self._store = store

    def artifact_id(self, scope: str, content: str) -> str:
        return self._store.artifact_id(scope, content)

    async def put_many(
        self,
        scope: str,
        items: Mapping[str, NewArtifact],
        *,
        ttl_seconds: int,
        max_per_scope: int,
    ) -> set[str]:
        return set()

    def lease(self) -> contextlib.AbstractContextManager[None]:
        return self._store.lease()

    async def get(self, scope: str, artifact_id: str) -> Artifact | None:
        return await self._store.get(scope, artifact_id)

    async def get_many(self, scope: str, artifact_ids: Sequence[str]) -> dict[str, Artifact]:
        return await self._store.get_many(scope, artifact_ids)

    async def claim(self, scope: str, key: str, *, ttl_seconds: int) -> bool:
        return False

    async def ping(self) -> bool:
        return await self._store.ping()

    async def close(self) -> None:
        """The shared store is the app's to close."""
