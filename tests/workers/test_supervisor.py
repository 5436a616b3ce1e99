"""The supervisor with stand-in workers: small Python programs started the way it starts
`ctxproxy serve --worker ...`, which say `ready` on their link (or not) and then exit or wait."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.workers.listen import listening_sockets
from proxy.workers.supervisor import START_FAILED, Supervisor

HANG_S = 60.0

# argv: -c --worker LISTEN_FD,LINK_FD,DIR. Each start appends a line to $STARTS; the first start
# serves, then crashes; every later one serves until SIGTERM.
_WORKER = """
import os, signal, socket, sys
starts = os.environ["STARTS"]
with open(starts, "a") as f:
    f.write("start\\n")
first = open(starts).read().count("start") == 1
link = socket.socket(fileno=int(sys.argv[2].split(",")[1]))
link.send(b"ready\\n")
if first:
    sys.exit(1)
signal.pause()  # until SIGTERM ends it
"""


@pytest.fixture
def directory() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="cw-") as name:
        yield Path(name)


async def test_a_worker_that_never_serves_fails_the_start(directory: Path) -> None:
    sockets = listening_sockets("127.0.0.1", 0, 2)
    announced: list[bool] = []
    argv = [sys.executable, "-c", "import sys; sys.exit(3)"]
    supervisor = Supervisor(argv, sockets, directory, lambda: announced.append(True))
    assert await asyncio.wait_for(supervisor.run(), HANG_S) == START_FAILED
    assert not announced
    assert all(sock.fileno() == -1 for sock in sockets), "the listening sockets stay open"


async def test_a_crashed_worker_is_replaced_and_sigterm_stops_it(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = directory / "starts"
    monkeypatch.setenv("STARTS", str(starts))
    sockets = listening_sockets("127.0.0.1", 0, 1)
    announced = asyncio.Event()
    argv = [sys.executable, "-c", _WORKER]
    supervisor = Supervisor(argv, sockets, directory, announced.set)
    running = asyncio.create_task(supervisor.run())
    await asyncio.wait_for(announced.wait(), HANG_S)

    async def replaced() -> None:
        while not starts.exists() or starts.read_text().count("start") < 2:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(replaced(), HANG_S)
    os.kill(os.getpid(), signal.SIGTERM)  # the supervisor's handler takes it, not the default
    assert await asyncio.wait_for(running, HANG_S) == 0
    assert starts.read_text().count("start") == 2
