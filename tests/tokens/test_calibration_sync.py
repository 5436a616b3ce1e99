"""`CalibrationSync`: replicas share count ratios through the real test Redis."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence

import pytest
import redis.asyncio
from shared_redis import delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.redis_store import RedisStore
from proxy.tokens.calibration import CountCalibration, ModelCalibration
from proxy.tokens.calibration_sync import CalibrationSync, SharedRatios

SECRET = b"test-secret-0123456789abcdef0123"


@pytest.fixture
async def stores() -> AsyncIterator[tuple[RedisStore, RedisStore]]:
    url = require_shared_redis()
    prefix = unique_prefix()
    one, two = (
        RedisStore(url, SECRET, key_prefix=prefix),
        RedisStore(url, SECRET, key_prefix=prefix),
    )
    yield one, two
    await one.close()
    await two.close()
    client = redis.asyncio.Redis.from_url(url)
    await delete_prefix(client, prefix)
    await client.aclose()


async def test_a_replica_applies_the_ratio_another_one_measured(
    stores: tuple[RedisStore, RedisStore],
) -> None:
    one, two = stores
    measuring, other = CountCalibration(), CountCalibration()
    for _ in range(3):
        measuring.observe("gpt-4o", 1000, 1250)
    assert other.ratio("gpt-4o") == 1.0  # asked for: refreshed by its next sync
    await CalibrationSync(measuring, one.count_ratios()).sync_once()
    await CalibrationSync(other, two.count_ratios()).sync_once()
    assert other.ratio("gpt-4o") == pytest.approx(1.25)
    assert other.snapshot() == {"gpt-4o": ModelCalibration(pytest.approx(1.25), 3)}
    # Both replicas' later samples merge into one average that each adopts.
    other.observe("gpt-4o", 1000, 1150)
    await CalibrationSync(other, two.count_ratios()).sync_once()
    await CalibrationSync(measuring, one.count_ratios()).sync_once()
    assert (
        measuring.snapshot()
        == other.snapshot()
        == {"gpt-4o": ModelCalibration(pytest.approx(1.25 + 0.2 * (1.15 - 1.25)), 4)}
    )


async def test_cancelling_the_loop_syncs_the_last_samples_once_more(
    stores: tuple[RedisStore, RedisStore],
) -> None:
    one, two = stores
    calibration = CountCalibration()
    task = asyncio.create_task(
        CalibrationSync(calibration, one.count_ratios(), interval_s=60).run()
    )
    await asyncio.sleep(0)
    for _ in range(3):
        calibration.observe("m", 1000, 1100)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await two.count_ratios().fetch(["m"]) == {"m": (pytest.approx(1.1), 3)}


class _Broken:
    async def merge(
        self, samples: Mapping[str, tuple[float, int]], *, alpha: float, low: float, high: float
    ) -> dict[str, tuple[float, int]]:
        raise ValueError("broken store")

    async def fetch(self, models: Sequence[str]) -> dict[str, tuple[float, int]]:
        return {}


async def test_a_failing_sync_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calibration = CountCalibration(min_samples=1)
    broken: SharedRatios = _Broken()
    task = asyncio.create_task(CalibrationSync(calibration, broken, interval_s=0.01).run())
    for _ in range(3):
        calibration.observe("m", 1000, 1100)
        await asyncio.sleep(0.03)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failures) >= 3 and failures[0].getMessage() == "count calibration sync failed"
    assert calibration.ratio("m") == pytest.approx(1.1)  # the local ratio still applies
