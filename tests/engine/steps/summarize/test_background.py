"""summarize/background.py: work that outlives a request, bounded per scope, one task per span."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from proxy.engine.steps.summarize import background as background_module
from proxy.engine.steps.summarize.background import Background
from proxy.engine.threads import Workers


async def test_one_task_per_key_and_at_most_per_scope_tasks_per_tenant() -> None:
    background = Background(per_scope=2)
    assert not background.start(["k0"], "s", asyncio.sleep)  # no loop bound yet
    background.bind(asyncio.get_running_loop())
    gate = asyncio.Event()
    runs: list[str] = []

    def work(name: str):  # type: ignore[no-untyped-def]
        async def run() -> str:
            runs.append(name)
            await gate.wait()
            return name

        return run

    assert background.start(["a1", "a2"], "s", work("a"))
    assert background.start(["x", "a2"], "s", work("dup"))  # its last span runs: not again
    assert background.start(["b"], "s", work("b"))
    assert not background.start(["c"], "s", work("c"))  # the tenant's two are running
    assert background.start(["d"], "other", work("d"))
    assert background.running("a1") and background.running("a2") and not background.running("c")
    assert await background.wait("a1", 0.01) == (False, None)
    gate.set()
    assert await background.wait("a2", 1) == (True, "a")
    await background.drain()
    assert sorted(runs) == ["a", "b", "d"] and not background.running("a1")
    assert background.start(["c"], "s", work("c"))
    await background.drain()


async def test_a_failure_ends_the_task_quietly_and_close_cancels() -> None:
    background = Background()
    background.bind(asyncio.get_running_loop())

    async def boom() -> None:
        raise RuntimeError("summarizer down")

    assert background.start(["k"], "s", boom)
    assert await background.wait("k", 1) == (True, None)
    assert background.start(["slow"], "s", lambda: asyncio.sleep(10))
    background.close()
    await asyncio.sleep(0)
    await background.drain()
    assert not background.running("slow")


async def test_started_from_a_worker_threads_loop_it_runs_on_the_apps_loop() -> None:
    background = Background()
    app_loop = asyncio.get_running_loop()
    background.bind(app_loop)
    seen: list[asyncio.AbstractEventLoop] = []

    async def work() -> int:
        seen.append(asyncio.get_running_loop())
        return 7

    async def in_worker() -> tuple[bool, object]:
        assert asyncio.get_running_loop() is not app_loop
        background.start(["w"], "s", work)
        return await background.wait("w", 2)

    workers = Workers(1)
    try:
        assert await workers.run(in_worker) == (True, 7)
    finally:
        workers.close()
    assert seen == [app_loop]


async def test_a_failure_returned_by_the_work_is_remembered_for_its_spans() -> None:
    background = Background()
    background.bind(asyncio.get_running_loop())
    error = ValueError("summarizer down")

    async def fails() -> Exception:
        return error

    async def works() -> str:
        return "ok"

    assert background.start(["a", "b"], "s", fails)
    await background.drain()
    assert background.recent_failure("a") is error and background.recent_failure("b") is error
    assert background.start(["c"], "s", works)
    await background.drain()
    assert background.recent_failure("c") is None


def test_reports_go_to_the_observer_and_its_failure_is_only_logged(caplog) -> None:  # type: ignore[no-untyped-def]
    seen: list[tuple[str, dict[str, int]]] = []
    Background(observer=lambda outcome, usage: seen.append((outcome, usage))).report(
        "made", {"prompt_tokens": 3}
    )
    assert seen == [("made", {"prompt_tokens": 3})]
    Background().report("made", {})  # no observer: nothing to tell

    def broken(outcome: str, usage: dict[str, int]) -> None:
        raise RuntimeError("metrics down")

    Background(observer=broken).report("failed", {})
    [record] = [r for r in caplog.records if r.name == "ctxproxy.summaries"]
    assert (record.levelname, record.getMessage()) == (
        "WARNING", "the background summary observer failed"
    )
    assert record.exc_info is not None and str(record.exc_info[1]) == "metrics down"  # why


# -- mutation run 4 ---------------------------------------------------------------------------


async def test_a_scope_of_one_runs_one_task_and_an_unknown_key_is_not_waited_for() -> None:
    background = Background(per_scope=1)
    background.bind(asyncio.get_running_loop())
    gate = asyncio.Event()
    assert background.start(["a"], "s", gate.wait)
    assert not background.start(["b"], "s", gate.wait)
    assert await background.wait("nothing", 0.01) == (False, None)
    gate.set()
    await background.drain()


async def test_a_task_cancelled_while_waited_for_is_done_without_a_result() -> None:
    background = Background()
    background.bind(asyncio.get_running_loop())
    assert background.start(["k"], "s", lambda: asyncio.sleep(10))
    waiter = asyncio.ensure_future(background.wait("k", 5))
    await asyncio.sleep(0)
    background.close()
    assert await waiter == (True, None)


async def test_a_failure_is_remembered_for_exactly_its_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    # the module's clock only: the event loop keeps the real one (its sleeps still end)
    monkeypatch.setattr(background_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    background = Background()
    background.bind(asyncio.get_running_loop())
    failure = ValueError("no summary")

    async def fail() -> Exception:
        return failure

    assert background.start(["k"], "s", fail)
    await background.drain()
    now[0] = 100.0 + background_module.FAILURE_MEMORY_S
    assert background.recent_failure("k") is failure
    now[0] += 0.001
    assert background.recent_failure("k") is None


async def test_a_failing_work_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy")
    background = Background()
    background.bind(asyncio.get_running_loop())

    async def boom() -> None:
        raise RuntimeError("summarizer down")

    assert background.start(["k"], "s", boom)
    await background.drain()
    [record] = [r for r in caplog.records if r.levelno == logging.INFO and r.exc_info]
    assert record.getMessage() == "a background summary failed"
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError


async def test_a_scopes_count_goes_down_as_its_tasks_end() -> None:
    background = Background(per_scope=2)
    background.bind(asyncio.get_running_loop())
    gates = {name: asyncio.Event() for name in "abcd"}
    for name in "ab":
        assert background.start([name], "s", gates[name].wait)
    gates["a"].set()
    await asyncio.sleep(0.01)  # "a" ended: one of two running
    assert background.start(["c"], "s", gates["c"].wait)
    assert not background.start(["d"], "s", gates["d"].wait)  # "b" and "c" run
    for gate in gates.values():
        gate.set()
    await background.drain()
    single = Background(per_scope=1)
    single.bind(asyncio.get_running_loop())
    for name in "ab":  # one after the other: the scope's count is back to none each time
        assert single.start([name], "s", lambda: asyncio.sleep(0))
        await single.drain()


async def test_the_failures_remembered_are_forgotten_at_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(background_module, "MAX_FAILURES", 2)
    background = Background()
    background.bind(asyncio.get_running_loop())

    async def fail() -> Exception:
        return ValueError("no summary")

    for key in ("k1", "k2", "k3"):
        assert background.start([key], "s", fail)
        await background.drain()
    assert [background.recent_failure(k) is not None for k in ("k1", "k2", "k3")] == [
        False,
        False,
        True,
    ]


async def test_a_thread_without_a_loop_is_on_another_loop() -> None:
    loop = asyncio.get_running_loop()
    assert not background_module._other_loop(loop)
    assert await asyncio.to_thread(background_module._other_loop, loop)


async def test_drain_ends_when_the_tasks_end_even_if_one_is_not_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Shutdown waits for the running tasks, not for the bookkeeping: a done callback that
    fails to forget its task (a bug) must not keep `drain` looping forever."""
    background = Background()
    background.bind(asyncio.get_running_loop())

    def broken_forget(*_: object) -> None:
        raise RuntimeError("forget failed")

    monkeypatch.setattr(background, "_forget", broken_forget)
    assert background.start(["k"], "s", lambda: asyncio.sleep(0.01))
    await asyncio.wait_for(background.drain(), timeout=30)
    assert background.running("k")  # still listed (never forgotten), yet drained


async def test_drain_right_after_close_waits_for_the_cancelled_tasks_quietly() -> None:
    background = Background()
    background.bind(asyncio.get_running_loop())
    assert background.start(["slow"], "s", lambda: asyncio.sleep(10))
    await asyncio.sleep(0)  # it runs
    background.close()
    await background.drain()  # the task's cancellation is waited for, not raised
    assert not background.running("slow")
