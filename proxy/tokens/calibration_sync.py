"""Replicas share their count ratios: a background sync between `CountCalibration` and the store.

Every `interval_s` the samples this process observed since the last sync go to the store, which
merges them into one running average per model (`SharedRatios.merge`), and the merged ratios of
every model this process observed or prepared for come back (`SharedRatios.fetch`) and are
adopted. A replica that never saw an answer for a model thus applies what the others measured.
The request path never waits for the store; a failed sync loses only that interval's samples.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from proxy.tokens.calibration import CountCalibration

_DEFAULT_LOGGER = logging.getLogger("ctxproxy.calibration")


@runtime_checkable
class SharedRatios(Protocol):
    """Count ratios kept in the shared store (`artifacts.redis_ratios.RedisCountRatios`)."""

    async def merge(
        self, samples: Mapping[str, tuple[float, int]], *, alpha: float, low: float, high: float
    ) -> dict[str, tuple[float, int]]:
        """Merge each model's (mean, count) of new samples into its shared running average;
        the merged (ratio, samples) of those models ({} when the store is unavailable)."""

    async def fetch(self, models: Sequence[str]) -> dict[str, tuple[float, int]]:
        """The shared (ratio, samples) of those models that have one."""


class CalibrationSync:
    """Pushes this process's samples to the store and adopts the merged ratios."""

    def __init__(
        self,
        calibration: CountCalibration,
        shared: SharedRatios,
        *,
        interval_s: float = 5.0,
        logger: logging.Logger | None = None,
    ) -> None:
        self._calibration = calibration
        self._shared = shared
        self._interval_s = interval_s
        self._log = logger or _DEFAULT_LOGGER

    async def sync_once(self) -> None:
        rule = self._calibration.rule
        pending = self._calibration.take_pending()
        merged = (
            await self._shared.merge(pending, alpha=rule.alpha, low=rule.low, high=rule.high)
            if pending
            else {}
        )
        others = [m for m in self._calibration.models_to_refresh() if m not in merged]
        fetched = await self._shared.fetch(others) if others else {}
        for model, (ratio, samples) in {**fetched, **merged}.items():
            self._calibration.adopt(model, ratio, samples)

    async def run(self) -> None:
        """Sync every `interval_s` until cancelled, then once more (the last samples count)."""
        try:
            while True:
                await asyncio.sleep(self._interval_s)
                await self._sync_logged()
        except asyncio.CancelledError:
            await self._sync_logged()
            raise

    async def _sync_logged(self) -> None:
        try:
            await self.sync_once()
        except Exception:  # a sync must never end the loop; the store logs its own outages
            self._log.exception("count calibration sync failed")
