"""engine.offload: work runs in worker threads, a target's coroutine methods on the loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from proxy.engine.offload import OnLoop, Workers


class Recorder:
    """Records the thread of each call."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def name(self) -> str:
        self.threads.append(threading.get_ident())
        return "sync"

    async def fetch(self, value: int, *, twice: bool = False) -> int:
        self.threads.append(threading.get_ident())
        await asyncio.sleep(0)
        return value * 2 if twice else value

    async def fail(self) -> None:
        raise KeyError("missing")


async def test_work_runs_in_a_worker_thread_and_coroutine_methods_on_the_loop() -> None:
    workers = Workers(1)
    recorder = Recorder()
    target = OnLoop(recorder, asyncio.get_running_loop())
    loop_thread = threading.get_ident()

    async def work() -> tuple[int, str, int]:
        return threading.get_ident(), target.name(), await target.fetch(21, twice=True)

    try:
        worker_thread, name, value = await workers.run(work)
    finally:
        workers.close()
    assert (name, value) == ("sync", 42)
    assert worker_thread != loop_thread
    assert recorder.threads == [worker_thread, loop_thread]  # sync there, async here


async def test_exceptions_reach_the_caller() -> None:
    workers = Workers(1)
    target = OnLoop(Recorder(), asyncio.get_running_loop())

    async def work() -> None:
        await target.fail()

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
        release.wait(10)
        ran.append("slow")

    async def queued() -> None:
        ran.append("queued")

    first = asyncio.ensure_future(workers.run(slow))
    second = asyncio.ensure_future(workers.run(queued))
    await asyncio.sleep(0)
    assert started.wait(5)
    threading.Timer(2.0, release.set).start()  # the work ends on its own after 2 s
    began = time.monotonic()
    workers.close()
    assert time.monotonic() - began < 1.0, "close() waited for the running work"
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
