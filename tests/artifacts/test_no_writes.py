"""`artifacts.no_writes`: the store as a request without a credential sees it."""

from __future__ import annotations

from proxy.artifacts.no_writes import NoWritesStore
from proxy.artifacts.store import MemoryStore, NewArtifact


async def test_it_reads_as_the_store_and_confirms_no_write() -> None:
    store = MemoryStore(b"secret")
    kept = store.artifact_id("s", "kept")
    await store.put_many("s", {kept: NewArtifact("kept", "k")}, ttl_seconds=60, max_per_scope=9)
    view = NoWritesStore(store)
    assert view.artifact_id("s", "kept") == kept
    found = await view.get("s", kept)
    assert found is not None and found.content == "kept"
    assert set(await view.get_many("s", [kept])) == {kept}
    new = view.artifact_id("s", "new")
    item = {new: NewArtifact("new", "k")}
    stored = await view.put_many("s", item, ttl_seconds=60, max_per_scope=9)
    assert stored == set()
    assert await store.get("s", new) is None  # nothing reached the store
    assert await view.claim("s", "work", ttl_seconds=5) is False
    assert await store.claim("s", "work", ttl_seconds=5) is True  # nor was anything claimed
    assert await view.ping()
    await view.close()
    assert await store.get("s", kept) is not None  # the shared store stays open
