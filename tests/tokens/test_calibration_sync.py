"""`CalibrationSync`: replicas share count ratios through the real test Redis."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence

import pytest
import redis.asyncio
from lost_cancel import LosesOneCancellation
from shared_redis import delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.redis_store import RedisStore
from proxy.tokens.calibration import CountCalibration, KeySnapshot
from proxy.tokens.calibration_rule import AppliedRatio, CalibrationKey, RatioRule, RatioSource
from proxy.tokens.calibration_sync import CalibrationSync, SharedKey, SharedRatios

SECRET = b"test-secret-0123456789abcdef0123"
K = CalibrationKey("fake", "gpt-4o")


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


def own(value: float) -> AppliedRatio:
    return AppliedRatio(pytest.approx(value), RatioSource.own)


async def sync(*pairs: tuple[CountCalibration, RedisStore]) -> None:
    for calibration, store in pairs:
        await CalibrationSync(calibration, store.count_ratios()).sync_once()


async def test_a_replica_applies_the_ratio_another_one_measured(
    stores: tuple[RedisStore, RedisStore],
) -> None:
    one, two = stores
    measuring, other = CountCalibration(), CountCalibration()
    for _ in range(3):
        measuring.observe(K, "a", 1000, 1250)
    assert other.applied(K, "a") == AppliedRatio()  # asked for: refreshed by its next sync
    await sync((measuring, one), (other, two))
    assert other.applied(K, "a") == own(1.25)
    assert other.snapshot() == {K: KeySnapshot(1.0, 1, 3)}
    # Both replicas' later samples merge into one state that each adopts.
    other.observe(K, "a", 1000, 1150)
    await sync((other, two), (measuring, one))
    assert measuring.applied(K, "a") == other.applied(K, "a") == own(1.225)  # mean of 4 samples
    assert measuring.snapshot() == other.snapshot() == {K: KeySnapshot(1.0, 1, 4)}


async def test_one_contributors_inflated_usage_reaches_no_other_contributor_on_any_replica(
    stores: tuple[RedisStore, RedisStore],
) -> None:
    one, two = stores
    poisoned, other = CountCalibration(), CountCalibration()
    for _ in range(4):  # the upstream of one tenant reports 3x on 4 answers
        poisoned.observe(K, "poisoner", 1000, 3000)
    assert other.applied(K, "honest") == AppliedRatio()
    await sync((poisoned, one), (other, two), (poisoned, one))
    for calibration in (poisoned, other):
        assert calibration.applied(K, "poisoner") == own(1.4)  # its own, on both replicas
        assert calibration.applied(K, "honest") == AppliedRatio(1.0, RatioSource.none)
        assert calibration.applied(CalibrationKey("other", "gpt-4o"), "poisoner") == AppliedRatio()


async def test_what_three_contributors_agree_on_applies_to_others_on_every_replica(
    stores: tuple[RedisStore, RedisStore],
) -> None:
    one, two = stores
    serving, other = CountCalibration(), CountCalibration()
    for who in ("a", "b", "c"):
        for _ in range(5):
            serving.observe(K, who, 1000, 1200)
    assert other.applied(K, "newcomer") == AppliedRatio()
    await sync((serving, one), (other, two))
    assert other.applied(K, "newcomer") == AppliedRatio(pytest.approx(1.2), RatioSource.agreed)


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
        calibration.observe(K, "a", 1000, 1100)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    shared = await two.count_ratios().exchange({}, [K], rule=RatioRule(), now=time.time())
    assert shared[K][1]["a"][:3] == (pytest.approx(1.1), pytest.approx(1.1), 3)


async def test_stop_ends_the_loop_after_one_last_sync_of_the_samples_since(
    stores: tuple[RedisStore, RedisStore],
) -> None:
    one, two = stores
    calibration = CountCalibration()
    sync = CalibrationSync(calibration, one.count_ratios(), interval_s=60)
    task = asyncio.create_task(sync.run())
    await asyncio.sleep(0)
    for _ in range(3):
        calibration.observe(K, "a", 1000, 1100)
    sync.stop()
    async with asyncio.timeout(30):  # generous: a hang fails here instead of hanging the run
        await task
    shared = await two.count_ratios().exchange({}, [K], rule=RatioRule(), now=time.time())
    assert shared[K][1]["a"][:3] == (pytest.approx(1.1), pytest.approx(1.1), 3)


async def test_stop_ends_the_loop_after_its_store_lost_a_cancellation() -> None:
    """A cancel lost inside the store's round trip (Python 3.11's `wait_for`) leaves the loop
    running; `stop` still ends it, after one last sync."""
    calibration = CountCalibration()
    calibration.observe(K, "a", 1000, 1100)
    shared = LosesOneCancellation()
    sync = CalibrationSync(calibration, shared, interval_s=0.01)
    task = asyncio.create_task(sync.run())
    async with asyncio.timeout(30):
        await shared.waiting.wait()
    task.cancel()
    async with asyncio.timeout(30):
        while shared.exchanges < 4:  # the cancel was lost: the loop goes on syncing
            await asyncio.sleep(0.01)
    assert shared.lost_cancellations == 1 and not task.done()
    sync.stop()
    async with asyncio.timeout(30):  # generous: a hang fails here instead of hanging the run
        await task
    assert not task.cancelled()


class _Broken:
    async def exchange(
        self,
        pushed: Mapping[tuple[str, str], Mapping[str, tuple[float, int]]],
        wanted: Sequence[tuple[str, str]],
        *,
        rule: RatioRule,
        now: float,
    ) -> dict[tuple[str, str], SharedKey]:
        raise ValueError("broken store")


async def test_a_failing_sync_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calibration = CountCalibration(RatioRule(min_samples=1))
    broken: SharedRatios = _Broken()
    task = asyncio.create_task(CalibrationSync(calibration, broken, interval_s=0.01).run())
    for _ in range(3):
        calibration.observe(K, "a", 1000, 1100)
        await asyncio.sleep(0.03)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failures) >= 3 and failures[0].getMessage() == "count calibration sync failed"
    assert calibration.applied(K, "a") == own(1.1)  # the local ratio still applies
