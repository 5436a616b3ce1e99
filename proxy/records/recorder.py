"""`Recorder`: hands each completion's record to the record store off the response path.

The edge calls `submit` once the answer is done; the record is built and written by a task of
a bounded set the app owns (drained at shutdown), never awaited by a response. A record that
cannot be kept (the store fails, or `max_pending` records are already waiting) is dropped and
counted (`ctxproxy_records_dropped_total`); the request it describes is never affected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from proxy.artifacts.records import RecordStore
from proxy.artifacts.store import StoreUnavailable
from proxy.records.build import Ending, build_record
from proxy.stats import RequestStats

log = logging.getLogger("ctxproxy.records")


class Recorder:
    def __init__(
        self, store: RecordStore, *, max_pending: int, dropped: Callable[[str], None]
    ) -> None:
        self.store = store
        self._max_pending = max_pending
        self._dropped = dropped
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def submit(self, scope: str, stats: RequestStats, end: Ending) -> None:
        """Write the record of a request of `scope` (its owner scope) in the background."""
        if len(self._pending) >= self._max_pending:
            self._dropped("backlog")
            return
        task = asyncio.get_running_loop().create_task(self._write(scope, stats, end))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _write(self, scope: str, stats: RequestStats, end: Ending) -> None:
        try:
            await self.store.add(scope, build_record(stats, end))
        except StoreUnavailable:
            self._dropped("store_unavailable")
        except Exception:
            log.exception("request record not kept", extra={"request_id": end.request_id})
            self._dropped("error")

    async def drain(self, grace_s: float) -> None:
        """Wait for the records still being written (at most `grace_s`), then drop the rest."""
        if not self._pending:
            return
        _, late = await asyncio.wait(set(self._pending), timeout=grace_s)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=grace_s)
            for _ in late:
                self._dropped("shutdown")
