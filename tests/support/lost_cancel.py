"""Shared count ratios whose first round trip loses a cancellation.

On Python 3.11 the Redis client's write goes through `asyncio.wait_for`, which returns the
finished write and drops a cancel that arrives in the same loop iteration (CPython gh-86296): the
caller's round trip completes as if it had never been cancelled. This double makes that
deterministic: its first `exchange` waits until cancelled, then returns normally; later ones
return at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from proxy.tokens.calibration_rule import RatioRule
from proxy.tokens.calibration_sync import SharedKey


class LosesOneCancellation:
    """A `SharedRatios` that answers nothing and swallows the first cancellation it meets."""

    def __init__(self) -> None:
        self.exchanges = 0
        self.lost_cancellations = 0
        self.waiting = asyncio.Event()
        """Set while the first exchange waits (cancel the task now to lose the cancel)."""

    async def exchange(
        self,
        pushed: Mapping[tuple[str, str], Mapping[str, tuple[float, int]]],
        wanted: Sequence[tuple[str, str]],
        *,
        rule: RatioRule,
        now: float,
    ) -> dict[tuple[str, str], SharedKey]:
        self.exchanges += 1
        if self.exchanges == 1:
            self.waiting.set()
            try:
                await asyncio.Event().wait()  # only a cancellation ends this
            except asyncio.CancelledError:
                self.lost_cancellations += 1  # ... and it is lost
        return {}
