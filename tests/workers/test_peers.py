"""Workers reading each other's metrics over Unix sockets, and the counts of stopped workers."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.metrics import Metrics
from proxy.stats import RequestStats
from proxy.workers.merge import parse
from proxy.workers.peers import RETIRED, PeerMetrics, add_retired, read_retired

HEALTHZ = 'ctxproxy_requests_total{policy="-",route="/healthz",status="200",tenant="-"}'


@pytest.fixture
def directory() -> Iterator[Path]:
    # short: a Unix socket's path has a limit of about 100 bytes (pytest's tmp_path can exceed it)
    with tempfile.TemporaryDirectory(prefix="cw-") as name:
        yield Path(name)


def _answered(metrics: Metrics, count: int) -> Metrics:
    for _ in range(count):
        metrics.record_request("/healthz", 200, RequestStats())
    return metrics


def _healthz(text: bytes) -> float:
    [line] = [x for x in text.decode().splitlines() if x.startswith(HEALTHZ)]
    return float(line.rsplit(" ", 1)[1])


async def test_a_scrape_sums_every_worker_serving(directory: Path) -> None:
    a_metrics, b_metrics = _answered(Metrics(), 2), _answered(Metrics(), 3)
    a = PeerMetrics(directory, a_metrics.render, pid=1001)
    b = PeerMetrics(directory, b_metrics.render, pid=1002)
    await a.serve()
    await b.serve()
    try:
        assert _healthz(await a.scrape()) == 5
        _answered(b_metrics, 1)
        assert _healthz(await a.scrape()) == 6
        assert _healthz(await b.scrape()) == 6
    finally:
        await a.close()
        await b.close()
    assert not list(directory.glob("*.sock"))


async def test_a_stopped_worker_stays_in_the_sums_counted_once(directory: Path) -> None:
    a = PeerMetrics(directory, _answered(Metrics(), 2).render, pid=1001)
    b_metrics = _answered(Metrics(), 3)
    b = PeerMetrics(directory, b_metrics.render, pid=1002)
    await a.serve()
    await b.serve()
    try:
        add_retired(directory, b.pid, parse(b_metrics.render().decode()))
        assert _healthz(await a.scrape()) == 5, "b still answers on its socket: counted once"
        await b.retire(grace_s=0)  # its counts are already in the file: not added twice
        assert _healthz(await a.scrape()) == 5
        pids, _ = read_retired(directory)
        assert pids == {1002}
        c = PeerMetrics(directory, _answered(Metrics(), 4).render, pid=1003)
        await c.serve()
        await c.retire(grace_s=0)
        assert _healthz(await a.scrape()) == 9
        assert read_retired(directory)[0] == {1002, 1003}
    finally:
        await a.close()
    assert "ctxproxy_policy_reload_failed" not in (directory / RETIRED).read_text()


async def test_a_worker_that_does_not_answer_is_left_out(directory: Path) -> None:
    a = PeerMetrics(directory, _answered(Metrics(), 2).render, pid=1001)
    (directory / "1005.sock").touch()  # a crashed worker's socket file: nobody listens
    await a.serve()
    try:
        assert _healthz(await a.scrape()) == 2
    finally:
        await a.close()


async def test_a_scrape_lists_the_families_in_one_process_order(directory: Path) -> None:
    metrics = _answered(Metrics(), 1)
    add_retired(directory, 1009, parse(_answered(Metrics(), 2).render().decode()))
    a = PeerMetrics(directory, metrics.render, pid=1001)
    await a.serve()
    try:
        scraped = (await a.scrape()).decode()
    finally:
        await a.close()

    def types(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("# TYPE")]

    assert types(scraped) == types(metrics.render().decode())
    assert _healthz(scraped.encode()) == 3
