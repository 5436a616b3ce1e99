"""Each worker's own metrics for the others, and the sum any worker answers `/metrics` with.

The supervisor gives every worker the same private directory. A worker serves its own
exposition on a Unix socket there (`<pid>.sock`: connect, read to the end). A scrape that reaches
one worker reads every other worker's socket, and `retired.prom`, and answers with the sum
(`proxy.workers.merge`). A worker that stops (a restart, a crash seen by the supervisor) must
not take its counts out of the sums: once its last request is done it adds its counters to
`retired.prom` (under a lock, replaced atomically, naming the workers it holds) and keeps its
socket open a little longer, so that a scrape counts it exactly once whichever it reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from collections.abc import Callable
from pathlib import Path

from prometheus_client.core import Metric

from proxy.metrics import SHARED_STATE
from proxy.workers.merge import merge, parse, render, retired_only

log = logging.getLogger("ctxproxy.workers")

RETIRED = "retired.prom"
_RETIRED_LOCK = "retired.lock"
_RETIRED_HEAD = "# ctxproxy retired workers:"
PEER_TIMEOUT_S = 2.0
"""How long a scrape waits for another worker's metrics (a worker busy on a large preparation)."""
RETIRE_GRACE_S = 2.5
"""How long a stopping worker's socket stays open once its counts are in `retired.prom`: longer
than a scrape's wait for a peer, so a scrape that read the file without it still reaches it."""


class PeerMetrics:
    """One worker's side: `serve()` its metrics, `scrape()` everyone's, `retire()` at the end."""

    def __init__(self, directory: Path, own: Callable[[], bytes], pid: int | None = None) -> None:
        self.directory = directory
        self._own = own
        self.pid = os.getpid() if pid is None else pid
        self._server: asyncio.Server | None = None

    @property
    def socket_path(self) -> Path:
        return self.directory / f"{self.pid}.sock"

    async def serve(self) -> None:
        self.socket_path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(self._answer, path=str(self.socket_path))

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(self._own())
            await writer.drain()
        except (ConnectionError, OSError):
            pass  # the scraping worker gave up on us
        finally:
            writer.close()

    async def scrape(self) -> bytes:
        """The sum over every worker, in the order of this one's own families (read last, the
        freshest)."""
        retired_pids, retired = read_retired(self.directory)
        peers = [
            path
            for path in sorted(self.directory.glob("*.sock"))
            if path.stem.isdigit() and int(path.stem) not in retired_pids | {self.pid}
        ]
        texts = await asyncio.gather(*(_read_peer(path) for path in peers))
        own = parse(self._own().decode())
        expositions = [own, *(parse(t) for t in texts if t is not None), retired]
        return render(merge(expositions, SHARED_STATE))

    async def retire(self, grace_s: float = RETIRE_GRACE_S) -> None:
        """Add this worker's counts to `retired.prom`, then close its socket after `grace_s`."""
        own = parse(self._own().decode())
        await asyncio.to_thread(add_retired, self.directory, self.pid, own)
        await asyncio.sleep(grace_s)
        await self.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self.socket_path.unlink(missing_ok=True)


async def _read_peer(path: Path) -> str | None:
    try:
        async with asyncio.timeout(PEER_TIMEOUT_S):
            reader, writer = await asyncio.open_unix_connection(str(path))
            try:
                data = await reader.read()  # to the end: the peer closes when done
            finally:
                writer.close()
        return data.decode()
    except (OSError, TimeoutError, UnicodeDecodeError) as exc:
        # a worker that just stopped: its counts are in retired.prom, or it crashed
        log.info("metrics of worker %s not read: %s", path.stem, type(exc).__name__)
        return None


def read_retired(directory: Path) -> tuple[set[int], list[Metric]]:
    """The workers `retired.prom` holds and their summed counts (none before the first)."""
    try:
        text = (directory / RETIRED).read_text()
    except FileNotFoundError:
        return set(), []
    first, _, _ = text.partition("\n")
    pids = {int(p) for p in first.removeprefix(_RETIRED_HEAD).split() if p.isdigit()}
    return pids, parse(text)


def add_retired(directory: Path, pid: int, families: list[Metric]) -> None:
    """Add one stopping worker's counts to `retired.prom` (blocking: run it in a thread)."""
    with open(directory / _RETIRED_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pids, retired = read_retired(directory)
        if pid in pids:
            return
        merged = merge([retired, retired_only(families, SHARED_STATE)])
        head = f"{_RETIRED_HEAD} {' '.join(str(p) for p in sorted(pids | {pid}))}\n"
        partial = directory / f"{RETIRED}.{pid}"
        partial.write_bytes(head.encode() + render(merged))
        os.replace(partial, directory / RETIRED)


def remove_stale_socket(directory: Path, pid: int) -> None:
    """A crashed worker's socket (nobody answers on it any more)."""
    with contextlib.suppress(OSError):
        (directory / f"{pid}.sock").unlink()
