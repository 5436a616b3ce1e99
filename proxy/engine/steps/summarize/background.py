"""Summaries made off the request path: bounded per tenant, one at a time per span.

A summary that a request cannot wait for (it would take longer than `timeout_s`), or that a
request near its trigger will soon need (precompute), is made by a task on the app's event loop
that outlives the request and freezes its result in the store (`cache`), where the next
request finds it. At most `per_scope` tasks run for one tenant scope; a span already being
summarized in this process is not started twice (`running`), and across replicas the caller
claims the span in the store first (`ArtifactStore.claim`). One per app (the `Preparer` holds it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

PER_SCOPE = 2
"""Background summaries running at once for one tenant scope; more are not started."""
FAILURE_MEMORY_S = 60.0
"""A span whose work failed is not retried, and not waited for, for this long."""
MAX_FAILURES = 1024

_log = logging.getLogger("ctxproxy.summaries")


Observer = Callable[[str, dict[str, int]], None]
"""Told of each summary made off the request path: ("made", the summarizer's usage) or
("failed", {}) (the app's metrics)."""


class Background:
    def __init__(self, per_scope: int = PER_SCOPE, observer: Observer | None = None) -> None:
        self._per_scope = per_scope
        self._observer = observer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._scopes: dict[str, int] = {}
        self._failures: dict[str, tuple[float, Exception]] = {}

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the tasks run on (the app's); set by the first preparation."""
        if self._loop is None:
            self._loop = loop

    def running(self, key: str) -> bool:
        return key in self._tasks

    def start(
        self, keys: list[str], scope: str, work: Callable[[], Coroutine[Any, Any, Any]]
    ) -> bool:
        """Run `work()` on the app's loop for `keys` (the spans it summarizes, in order) unless
        the last of them already runs (True) or the scope has `per_scope` tasks running, or no
        loop is bound yet (False). A key already running keeps its first task."""
        if keys and keys[-1] in self._tasks:
            return True
        loop = self._loop
        if loop is None or not keys or self._scopes.get(scope, 0) >= self._per_scope:
            return False
        self._scopes[scope] = self._scopes.get(scope, 0) + 1
        task = _on(loop, lambda: loop.create_task(self._run(work)))
        for key in keys:
            self._tasks.setdefault(key, task)
        # also when it is cancelled before it started
        task.add_done_callback(lambda done: self._forget(keys, scope, done))
        return True

    async def wait(self, key: str, timeout: float) -> tuple[bool, Any]:
        """(done, its result) of the task of `key` after waiting at most `timeout` seconds,
        from any loop; the task goes on when the wait ends."""
        task = self._tasks.get(key)
        if task is None or self._loop is None:
            return False, None
        waited = asyncio.wait({task}, timeout=timeout)
        if _other_loop(self._loop):
            done, _ = await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(waited, self._loop)
            )
        else:
            done, _ = await waited
        if not done:
            return False, None
        return True, None if task.cancelled() else task.result()

    async def _run(self, work: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        try:
            return await work()
        except Exception:  # a background summary that fails is made again when needed
            _log.info("a background summary failed", exc_info=True)
            return None

    def report(self, outcome: str, usage: dict[str, int]) -> None:
        """A summary made ("made", with its usage) or not ("failed") by background work."""
        if self._observer is None:
            return
        try:
            self._observer(outcome, usage)
        except Exception:  # an observer's failure must not fail the work
            _log.warning("the background summary observer failed", exc_info=True)

    def recent_failure(self, key: str) -> Exception | None:
        """What the work for `key` failed with (it returned an exception), if that was less
        than `FAILURE_MEMORY_S` ago: such a span is neither waited for nor retried meanwhile."""
        found = self._failures.get(key)
        if found is None or found[0] < time.monotonic():
            return None
        return found[1]

    def _forget(self, keys: list[str], scope: str, task: asyncio.Task[Any]) -> None:
        failed = None
        if not task.cancelled() and isinstance(task.result(), Exception):
            failed = task.result()
        if len(self._failures) >= MAX_FAILURES:
            self._failures.clear()
        for key in keys:
            if self._tasks.get(key) is task:
                del self._tasks[key]
            if failed is not None:
                self._failures[key] = (time.monotonic() + FAILURE_MEMORY_S, failed)
        left = self._scopes.get(scope, 1) - 1
        if left:
            self._scopes[scope] = left
        else:
            self._scopes.pop(scope, None)

    async def drain(self) -> None:
        """Wait (on the app's loop) until no task runs (the tests; shutdown cancels, `close`).
        Waits for the tasks that have not ended rather than for `_tasks` to empty, so a done
        callback that failed to forget its task cannot keep the caller waiting forever."""
        while pending := {task for task in self._tasks.values() if not task.done()}:
            await asyncio.gather(*pending, return_exceptions=True)
        await asyncio.sleep(0)  # the done callbacks (which forget the tasks) run first

    def close(self) -> None:
        for future in list(self._tasks.values()):
            future.cancel()


def _on(
    loop: asyncio.AbstractEventLoop, make: Callable[[], asyncio.Task[Any]]
) -> asyncio.Task[Any]:
    """`make()` run on `loop` (from a worker thread's loop: handed over, waited for)."""
    if not _other_loop(loop):
        return make()

    async def made() -> asyncio.Task[Any]:
        return make()

    return asyncio.run_coroutine_threadsafe(made(), loop).result()


def _other_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is not loop
    except RuntimeError:
        return True
