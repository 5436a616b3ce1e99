"""What the availability run needs to measure on a loaded machine: CPU hogs and a prober process.

`cpu_hogs(n)` starts n busy Python processes (a loop that never sleeps) for the time of its
block and stops them after (or when the run's process is gone), so that the proxy shares the
machine's cores with CPU-bound work as it would on a busy host. `probing(port)` sends
`GET /healthz` from a process of its own over one keep-alive connection, one probe
`PROBE_PAUSE_S` after the previous answer (a probe not answered 200 within `PROBE_TIMEOUT_S`
counts as unanswered and the connection is reopened): work in the run's own process (building a
30 MB body, sending it) never delays a probe.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

PROBE_PAUSE_S = 0.02
PROBE_TIMEOUT_S = 2.0
_SPAWN = multiprocessing.get_context("spawn")


def _busy(stop: Any, parent: int) -> None:
    while not stop.is_set() and os.getppid() == parent:  # never outlives the run
        for _ in range(200_000):
            pass


@contextmanager
def cpu_hogs(count: int) -> Iterator[list[int]]:
    """`count` CPU-bound processes running for the block (their pids)."""
    stop = _SPAWN.Event()
    args = (stop, os.getpid())
    hogs = [_SPAWN.Process(target=_busy, args=args, daemon=True) for _ in range(count)]
    for hog in hogs:
        hog.start()
    try:
        yield [hog.pid for hog in hogs if hog.pid is not None]
    finally:
        stop.set()
        for hog in hogs:
            hog.join(5)
            if hog.is_alive():
                hog.terminate()
                hog.join(5)


@dataclass
class Latencies:
    """The probes of one or more measurements: how many were sent, and the answered ones'
    latencies in seconds (quantiles by nearest rank, as the availability table always had)."""

    sent: int = 0
    answered: list[float] = field(default_factory=list)

    def add(self, other: Latencies) -> None:
        self.sent += other.sent
        self.answered += other.answered

    def ms(self, q: float) -> float:
        ordered = sorted(self.answered)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    def cells(self) -> str:
        """`answered/sent | p50 | p99 | max` (milliseconds) for a Markdown row."""
        return (
            f"{len(self.answered)}/{self.sent} | {self.ms(0.5):.1f} | {self.ms(0.99):.1f} | "
            f"{self.ms(1.0):.1f}"
        )


def _probe(port: int, ready: Any, stop: Any, out: Connection) -> None:
    import http.client

    sent, answered = 0, []
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT_S)
    while not stop.is_set():
        if sent == 1:
            ready.set()
        sent += 1
        started = time.perf_counter()
        try:
            connection.request("GET", "/healthz")
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                answered.append(time.perf_counter() - started)
        except OSError:
            connection.close()
        stop.wait(PROBE_PAUSE_S)
    connection.close()
    out.send((sent, answered))


@contextmanager
def probing(port: int, settle_s: float = 0.3) -> Iterator[Latencies]:
    """Probes of `/healthz` on `port` during the block, from another process; the `Latencies`
    yielded is filled when the block ends (`settle_s` of probing before and after it)."""
    ready, stop = _SPAWN.Event(), _SPAWN.Event()
    receiver, sender = _SPAWN.Pipe(duplex=False)
    process = _SPAWN.Process(target=_probe, args=(port, ready, stop, sender), daemon=True)
    process.start()
    ready.wait(30)  # its first probe went out: a while of probing the idle proxy, then the block
    time.sleep(settle_s)
    latencies = Latencies()
    try:
        yield latencies
    finally:
        time.sleep(settle_s)
        stop.set()
        if receiver.poll(30):
            sent, answered = receiver.recv()
            latencies.add(Latencies(sent, answered))
        process.join(10)
