"""Large preparations run in worker threads, so that no single request stalls the event loop.

Counting and planning a request is CPU work proportional to its size (an 8 MB tool result takes
~0.2-1 s, 100,000 tiny messages ~1.5 s). Above a size the whole preparation runs on its own event
loop in one of a few worker threads (`Workers`), while every call it makes to the store and the
summarizer still runs on the app's loop, whose connections they are: `StoreOnLoop` and
`SummarizerOnLoop` are the store and the summarizer as the worker sees them, each of their
coroutine methods awaited across threads. The GIL is shared, but a thread switch every
`sys.getswitchinterval()` keeps the app's loop answering other requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from proxy.artifacts.store import Artifact, ArtifactStore, NewArtifact
from proxy.engine.steps.summarize.summarizer import Summarizer, SummaryCall, SummaryReply

T = TypeVar("T")

OFFLOAD_BYTES = 512 * 1024
"""Requests from this many bytes are prepared in a worker (counting 512 KB takes ~15-40 ms)."""
OFFLOAD_ITEMS = 2_000
"""...or from this many items (counting costs ~15 us per item, however small)."""
OFFLOAD_THREADS = 2
"""Preparations running at once in workers; more wait for a free one (queued, not threads)."""


async def _on(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, T]) -> T:
    """`work` run on `loop` (another thread's), awaited here."""
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, loop))


class StoreOnLoop:
    """`store` for code running in a worker: its I/O runs on `loop` (the app's)."""

    def __init__(self, store: ArtifactStore, loop: asyncio.AbstractEventLoop) -> None:
        self._store = store
        self._loop = loop

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
        work = self._store.put_many(
            scope, items, ttl_seconds=ttl_seconds, max_per_scope=max_per_scope
        )
        return await _on(self._loop, work)

    def lease(self) -> contextlib.AbstractContextManager[None]:
        return self._store.lease()

    async def get(self, scope: str, artifact_id: str) -> Artifact | None:
        return await _on(self._loop, self._store.get(scope, artifact_id))

    async def get_many(self, scope: str, artifact_ids: Sequence[str]) -> dict[str, Artifact]:
        return await _on(self._loop, self._store.get_many(scope, artifact_ids))

    async def claim(self, scope: str, key: str, *, ttl_seconds: int) -> bool:
        return await _on(self._loop, self._store.claim(scope, key, ttl_seconds=ttl_seconds))

    async def ping(self) -> bool:
        return await _on(self._loop, self._store.ping())

    async def close(self) -> None:
        await _on(self._loop, self._store.close())


class SummarizerOnLoop:
    """`summarizer` for code running in a worker: its calls run on `loop` (the app's)."""

    def __init__(self, summarizer: Summarizer, loop: asyncio.AbstractEventLoop) -> None:
        self._summarizer = summarizer
        self._loop = loop

    async def summarize(self, call: SummaryCall) -> SummaryReply:
        return await _on(self._loop, self._summarizer.summarize(call))


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
