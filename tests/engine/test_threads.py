"""engine.threads: work runs in worker threads, the store's and summarizer's calls on the loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from proxy.artifacts.store import Artifact, MemoryStore, NewArtifact
from proxy.engine.steps.summarize.summarizer import SummaryCall, SummaryReply
from proxy.engine.threads import StoreOnLoop, SummarizerOnLoop, Workers

HANG_S = 30.0
"""How long held work waits for its release: only a broken close() lets it run that long."""


class RecordingStore(MemoryStore):
    """A memory store that records the thread of each call."""

    def __init__(self) -> None:
        super().__init__(b"secret")
        self.threads: list[tuple[str, int]] = []

    def artifact_id(self, scope: str, content: str) -> str:
        self.threads.append(("artifact_id", threading.get_ident()))
        return super().artifact_id(scope, content)

    async def get(self, scope: str, artifact_id: str) -> Artifact | None:
        self.threads.append(("get", threading.get_ident()))
        return await super().get(scope, artifact_id)

    async def claim(self, scope: str, key: str, *, ttl_seconds: int) -> bool:
        raise KeyError("missing")


class RecordingSummarizer:
    def __init__(self) -> None:
        self.threads: list[int] = []

    async def summarize(self, call: SummaryCall) -> SummaryReply:
        self.threads.append(threading.get_ident())
        return SummaryReply(answer="{}", model="m")


async def test_work_runs_in_a_worker_thread_and_store_and_summarizer_calls_on_the_loop() -> None:
    workers = Workers(1)
    store, summarizer = RecordingStore(), RecordingSummarizer()
    loop = asyncio.get_running_loop()
    on_store, on_summarizer = StoreOnLoop(store, loop), SummarizerOnLoop(summarizer, loop)
    loop_thread = threading.get_ident()
    aid = store.artifact_id("s", "text")
    await store.put_many("s", {aid: NewArtifact("text", "k")}, ttl_seconds=60, max_per_scope=9)
    store.threads.clear()

    async def work() -> tuple[int, str, str | None, str, set[str]]:
        own = on_store.artifact_id("s", "text")
        found = await on_store.get("s", own)
        reply = await on_summarizer.summarize(SummaryCall("i", "", "t", 100, None, None))
        new = NewArtifact("more", "k")
        kept = await on_store.put_many(
            "s", {on_store.artifact_id("s", "more"): new}, ttl_seconds=60, max_per_scope=9
        )
        return threading.get_ident(), own, found.content if found else None, reply.model, kept

    try:
        worker_thread, own, content, model, kept = await workers.run(work)
    finally:
        workers.close()
    assert (own, content, model) == (aid, "text", "m")
    assert kept == {store.artifact_id("s", "more")}
    assert worker_thread != loop_thread
    # ids are pure (there), I/O runs here
    assert store.threads[:2] == [("artifact_id", worker_thread), ("get", loop_thread)]
    assert summarizer.threads == [loop_thread]


async def test_exceptions_reach_the_caller() -> None:
    workers = Workers(1)
    target = StoreOnLoop(RecordingStore(), asyncio.get_running_loop())

    async def work() -> None:
        await target.claim("s", "k", ttl_seconds=1)

    try:
        with pytest.raises(KeyError, match="missing"):
            await workers.run(work)
    finally:
        workers.close()


async def test_at_most_the_given_threads_run_at_once() -> None:
    workers = Workers(2)
    running = 0
    most = 0
    lock = threading.Lock()

    async def work() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        await asyncio.sleep(0.05)
        with lock:
            running -= 1

    try:
        await asyncio.gather(*(workers.run(work) for _ in range(6)))
    finally:
        workers.close()
    assert most == 2


async def test_work_cancelled_while_waiting_is_never_started() -> None:
    workers = Workers(1)
    release = threading.Event()
    started: list[str] = []

    async def blocker() -> None:
        started.append("blocker")
        release.wait(5)

    async def waiting() -> None:
        started.append("waiting")

    first = asyncio.ensure_future(workers.run(blocker))
    second = asyncio.ensure_future(workers.run(lambda: waiting()))
    await asyncio.sleep(0.05)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    release.set()
    await first
    workers.close()
    assert started == ["blocker"]


# -- mutation run 4 ---------------------------------------------------------------------------

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


async def test_work_sees_the_callers_context_variables() -> None:
    workers = Workers(1)
    REQUEST_ID.set("r-42")

    async def work() -> str:
        return REQUEST_ID.get()

    try:
        assert await workers.run(work) == "r-42"
    finally:
        workers.close()


async def test_closing_neither_waits_for_running_work_nor_starts_the_queued() -> None:
    workers = Workers(1)
    release, started = threading.Event(), threading.Event()
    ran: list[str] = []

    async def slow() -> None:
        started.set()
        release.wait(HANG_S)  # released below, after close() returned (or on its own)
        ran.append("slow")

    async def queued() -> None:
        ran.append("queued")

    first = asyncio.ensure_future(workers.run(slow))
    second = asyncio.ensure_future(workers.run(queued))
    await asyncio.sleep(0)
    assert started.wait(HANG_S)
    workers.close()
    assert ran == [], "close() waited for the running work"  # still held by `release`
    with pytest.raises(asyncio.CancelledError):
        await second
    release.set()
    await first
    assert ran == ["slow"]


async def test_the_workers_threads_are_named_as_the_proxys() -> None:
    workers = Workers(1)

    async def name() -> str:
        return threading.current_thread().name

    try:
        assert (await workers.run(name)).startswith("ctxproxy-prepare")
    finally:
        workers.close()
