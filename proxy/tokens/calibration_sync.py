"""Replicas share their count ratios: a background sync between `CountCalibration` and the store.

Every `interval_s` the samples this process observed since the last sync go to the store, which
merges them per upstream, model and contributor by the same rule (`calibration_rule`), and the
merged state of every key this process observed or prepared for comes back and is adopted: the
agreed ratio and each contributor's own. Both ways are one exchange (`SharedRatios.exchange`,
one round trip). A replica that never saw an answer for a key, or for a contributor, thus
applies what the others measured. The request path never waits for the store; a failed sync
loses only that interval's samples.

The loop ends when `stop` is called, not on cancellation alone: on Python 3.11 a cancel that
arrives while the Redis client's write finishes is lost inside `asyncio.wait_for` (CPython
gh-86296), and a loop that waits only for its cancellation then syncs on forever while whoever
cancelled it waits for it to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from proxy.tokens.calibration import CountCalibration
from proxy.tokens.calibration_rule import RatioRule

_DEFAULT_LOGGER = logging.getLogger("ctxproxy.calibration")

SharedKey = tuple[float, dict[str, tuple[float, float, int, float]]]
"""A key's shared state: the agreed ratio, and per contributor (ratio, average, samples,
updated)."""


@runtime_checkable
class SharedRatios(Protocol):
    """Count ratios kept in the shared store (`artifacts.redis_ratios.RedisCountRatios`)."""

    async def exchange(
        self,
        pushed: Mapping[tuple[str, str], Mapping[str, tuple[float, int]]],
        wanted: Sequence[tuple[str, str]],
        *,
        rule: RatioRule,
        now: float,
    ) -> dict[tuple[str, str], SharedKey]:
        """Merge the (mean, count) of new samples per key and contributor by `rule`, and read
        the keys `wanted`: the merged state of every key pushed or wanted that the store
        answered for ({} when the store is unavailable)."""


class CalibrationSync:
    """Pushes this process's samples to the store and adopts the merged state."""

    def __init__(
        self,
        calibration: CountCalibration,
        shared: SharedRatios,
        *,
        interval_s: float = 5.0,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._calibration = calibration
        self._shared = shared
        self._interval_s = interval_s
        self._log = logger or _DEFAULT_LOGGER
        self._clock = clock
        self._stopping = asyncio.Event()

    async def sync_once(self) -> None:
        calibration = self._calibration
        pending = calibration.take_pending()
        wanted = [k for k in calibration.keys_to_refresh() if k not in pending]
        if not pending and not wanted:
            return
        shared = await self._shared.exchange(
            pending, wanted, rule=calibration.rule, now=self._clock()
        )
        for key in [*pending, *wanted]:
            state = shared.get(key)
            if state is not None:
                calibration.adopt(key, *state)

    async def run(self) -> None:
        """Sync every `interval_s` until `stop` (or a cancellation that arrives), then once
        more: the last samples count."""
        try:
            while not await self._stop_requested_within(self._interval_s):
                await self._sync_logged()
        except asyncio.CancelledError:
            await self._sync_logged()
            raise
        await self._sync_logged()

    def stop(self) -> None:
        """End `run` after one last sync (the one in flight, if any, finishes first)."""
        self._stopping.set()

    async def _stop_requested_within(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        return self._stopping.is_set()

    async def _sync_logged(self) -> None:
        try:
            await self.sync_once()
        except Exception:  # a sync must never end the loop; the store logs its own outages
            self._log.exception("count calibration sync failed")
