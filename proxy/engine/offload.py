"""Large preparations run in worker threads, so that no single request stalls the event loop.

Counting and planning a request is CPU work proportional to its size (an 8 MB tool result takes
~0.2-1 s, 100,000 tiny messages ~1.5 s). Above a size the whole preparation runs on its own event
loop in one of a few worker threads, while every store call it makes still runs on the app's loop
(the store's connections belong to that loop). The GIL is shared, but a thread switch every
`sys.getswitchinterval()` keeps the app's loop answering other requests.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

OFFLOAD_BYTES = 512 * 1024
"""Requests from this many bytes are prepared in a worker (counting 512 KB takes ~15-40 ms)."""
OFFLOAD_ITEMS = 2_000
"""...or from this many items (counting costs ~15 us per item, however small)."""
OFFLOAD_THREADS = 2
"""Preparations running at once in workers; more wait for a free one (queued, not threads)."""


class OnLoop:
    """A proxy of `target` for code running on another event loop: its coroutine methods run on
    `loop` (the app's), awaited across threads; everything else is the target's own."""

    def __init__(self, target: object, loop: asyncio.AbstractEventLoop) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute
        loop = self._loop

        async def on_loop(*args: Any, **kwargs: Any) -> Any:
            future = asyncio.run_coroutine_threadsafe(attribute(*args, **kwargs), loop)
            return await asyncio.wrap_future(future)

        return on_loop


class Workers:
    """A few threads that each run one coroutine to completion on a fresh event loop."""

    def __init__(self, threads: int = OFFLOAD_THREADS) -> None:
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="ctxproxy-prepare")

    async def run(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """`await work()` in a worker thread; `work` is called there (the coroutine is never
        created if the caller is cancelled while waiting for a free worker)."""
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, context.run, _run_coroutine, work)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _run_coroutine(work: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await work()

    return asyncio.run(main())
