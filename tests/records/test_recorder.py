"""The recorder: records queued at the end of a request, written in batches by one task, dropped
and counted when the store fails or too many wait; what is queued is written at stop."""

from __future__ import annotations

import asyncio
from collections import Counter

from proxy.artifacts.records import MemoryRecords, RecordQuery
from proxy.artifacts.redis_store import RedisStore
from proxy.records.build import Ending
from proxy.records.recorder import Recorder
from proxy.stats import RequestStats

WAIT_S = 30.0


def ending(n: int) -> Ending:
    return Ending(f"{n:032x}", "/v1/chat/completions", "openai_chat", 200, {}, 0.1, 1000.0 + n)


def stats() -> RequestStats:
    return RequestStats(tenant="acme", policy="default")


async def settled(recorder: Recorder) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while recorder.pending:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)


async def listed(store: MemoryRecords) -> list[str]:
    page = await store.page(None, RecordQuery(limit=200))
    return [item["request_id"] for item in page.data]


async def test_submitted_records_are_written_in_the_background() -> None:
    store = MemoryRecords(ttl_seconds=60, max_records=100)
    dropped: Counter[str] = Counter()
    recorder = Recorder(store, max_pending=100, dropped=dropped.update)
    recorder.start()
    for n in range(5):
        recorder.submit("acme", stats(), ending(n))
    assert recorder.pending == 5  # nothing written until the loop runs the writer
    await settled(recorder)
    assert await listed(store) == [f"{n:032x}" for n in range(4, -1, -1)]
    await recorder.stop(WAIT_S)
    assert dropped == Counter()


async def test_beyond_max_pending_records_are_dropped() -> None:
    store = MemoryRecords(ttl_seconds=60, max_records=100)
    dropped: Counter[str] = Counter()
    recorder = Recorder(store, max_pending=2, dropped=lambda reason: dropped.update([reason]))
    recorder.start()
    for n in range(5):
        recorder.submit("acme", stats(), ending(n))
    assert dropped == Counter({"backlog": 3})
    await settled(recorder)
    assert await listed(store) == [f"{n:032x}" for n in (1, 0)]
    await recorder.stop(WAIT_S)


async def test_a_store_that_fails_drops_and_counts() -> None:
    store = RedisStore("redis://127.0.0.1:1/0", b"secret", socket_timeout=0.5)
    dropped: Counter[str] = Counter()
    records = store.request_records(ttl_seconds=60, max_records=10)
    recorder = Recorder(records, max_pending=10, dropped=lambda reason: dropped.update([reason]))
    recorder.start()
    try:
        for n in range(3):
            recorder.submit("acme", stats(), ending(n))
        await settled(recorder)
        assert dropped == Counter({"store_unavailable": 3})
    finally:
        await recorder.stop(WAIT_S)
        await store.close()


async def test_stop_writes_what_is_queued_then_refuses_more() -> None:
    store = MemoryRecords(ttl_seconds=60, max_records=100)
    dropped: Counter[str] = Counter()
    recorder = Recorder(store, max_pending=100, dropped=lambda reason: dropped.update([reason]))
    recorder.start()
    for n in range(3):
        recorder.submit("acme", stats(), ending(n))
    await recorder.stop(WAIT_S)
    assert len(await listed(store)) == 3 and recorder.pending == 0
    recorder.submit("acme", stats(), ending(9))
    assert dropped == Counter({"shutdown": 1}) and len(await listed(store)) == 3


async def test_lingering_batches_records_and_stop_flushes_at_once() -> None:
    store = MemoryRecords(ttl_seconds=60, max_records=100)
    recorder = Recorder(store, max_pending=100, dropped=lambda reason: None, linger_s=WAIT_S)
    recorder.start()
    recorder.submit("acme", stats(), ending(0))
    for _ in range(5):
        await asyncio.sleep(0)  # the writer is woken and lingers
    recorder.submit("acme", stats(), ending(1))
    assert recorder.pending == 2 and await listed(store) == []
    await asyncio.wait_for(recorder.stop(WAIT_S), WAIT_S / 2)  # does not wait out the linger
    assert await listed(store) == [f"{n:032x}" for n in (1, 0)]
