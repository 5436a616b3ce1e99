"""`ctxproxy serve --workers N` (N > 1): the supervisor that runs N worker processes on one port.

The supervisor serves no request itself. It binds one listening socket per worker slot
(`proxy.workers.listen`), starts each worker as `ctxproxy serve ... --worker ...` with its slot's
socket and a link (`proxy.workers.link`), and then:

- SIGTERM or SIGINT: closes its own copies of the sockets and sends SIGTERM to every worker;
  each stops accepting, finishes the requests it has (streams included, up to the server's
  shutdown timeout) and exits; the supervisor exits once all have;
- SIGHUP: replaces the workers one by one. A slot's new worker (with the config file read
  again) starts on the same socket, and only once it serves is the old one told to stop: the
  port never stops accepting. A new worker that fails to start leaves the old ones serving;
- a worker that exits on its own (a crash) is replaced after a pause that doubles up to 30 s
  while its replacements keep failing.

The first worker starts alone: a start-up failure is then printed once, by that worker, and
the supervisor exits with code 2 (as `ctxproxy serve` does for any start-up failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proxy.workers.link import READY, WorkerRole
from proxy.workers.peers import remove_stale_socket

log = logging.getLogger("ctxproxy.workers")

STOP_TIMEOUT_S = 90.0
"""How long the workers may take to finish their requests at shutdown (the server's own
shutdown timeout is 60 s) before they are killed."""
MAX_BACKOFF_S = 30.0
START_FAILED = 2


@dataclass(eq=False)
class Worker:
    slot: int
    process: asyncio.subprocess.Process
    link: socket.socket
    ready: asyncio.Future[bool] = field(default_factory=asyncio.Future)
    retiring: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.retiring = True
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)


class Supervisor:
    def __init__(
        self,
        argv: Sequence[str],
        sockets: Sequence[socket.socket],
        directory: Path,
        announce: Callable[[], None],
    ) -> None:
        self._argv = list(argv)
        self._sockets = list(sockets)
        self._directory = directory
        self._announce = announce
        self._slots: list[Worker | None] = [None] * len(sockets)
        self._all: set[Worker] = set()
        self._failures = [0] * len(sockets)
        self._events: asyncio.Queue[str | Worker] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> int:
        """Serve until SIGTERM or SIGINT; the exit code (START_FAILED if a worker never served)."""
        loop = asyncio.get_running_loop()
        signals = {signal.SIGTERM: "stop", signal.SIGINT: "stop", signal.SIGHUP: "restart"}
        for signum, event in signals.items():
            loop.add_signal_handler(signum, self._events.put_nowait, event)
        try:
            if not await self._start_all():
                return START_FAILED
            self._announce()
            await self._supervise()
            return 0
        finally:
            for task in self._tasks:
                task.cancel()
            await self._stop_all()
            for signum in signals:
                loop.remove_signal_handler(signum)

    async def _supervise(self) -> None:
        restart: asyncio.Task[None] | None = None
        while True:
            event = await self._events.get()
            if event == "stop":
                log.info("stopping: %d workers finish their requests", len(self._all))
                return
            if event == "restart" and (restart is None or restart.done()):
                restart = self._spawn_task(self._restart_all())
            elif isinstance(event, Worker):
                self._exited(event)

    def _spawn_task(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _start_all(self) -> bool:
        if not await self._start(0):
            return False
        starts = [self._start(slot) for slot in range(1, len(self._slots))]
        return all(await asyncio.gather(*starts))

    async def _start(self, slot: int) -> bool:
        worker = await self._launch(slot)
        if not await worker.ready:
            return False
        self._slots[slot] = worker
        return True

    async def _launch(self, slot: int) -> Worker:
        ours, theirs = socket.socketpair()
        role = WorkerRole(self._sockets[slot].fileno(), theirs.fileno(), self._directory)
        try:
            process = await asyncio.create_subprocess_exec(
                *self._argv,
                "--worker",
                role.argument(),
                pass_fds=(role.listen_fd, role.link_fd),
                # a session of its own: a terminal's Ctrl-C or hangup reaches the supervisor
                # only (which stops or restarts them in order), and where the kernel shares CPU
                # by session (autogroup) each worker has its own share
                start_new_session=True,
            )
        finally:
            theirs.close()
        worker = Worker(slot, process, ours)
        self._all.add(worker)
        self._spawn_task(self._watch(worker))
        return worker

    async def _watch(self, worker: Worker) -> None:
        """Mark `worker` ready when it says so; report its exit."""
        loop = asyncio.get_running_loop()
        worker.link.setblocking(False)
        received = b""
        with contextlib.suppress(OSError):
            while data := await loop.sock_recv(worker.link, 64):
                received += data
                if READY in received and not worker.ready.done():
                    worker.ready.set_result(True)
                    self._failures[worker.slot] = 0
                    log.info("worker %d (slot %d) serving", worker.pid, worker.slot)
        code = await worker.process.wait()
        worker.link.close()
        self._all.discard(worker)
        if not worker.ready.done():
            worker.ready.set_result(False)  # it printed why itself (`cli.startup_failure`)
        elif not worker.retiring:
            log.error("worker %d (slot %d) exited with code %s", worker.pid, worker.slot, code)
        self._events.put_nowait(worker)

    def _exited(self, worker: Worker) -> None:
        if worker.retiring or self._slots[worker.slot] is not worker:
            return
        remove_stale_socket(self._directory, worker.pid)
        self._slots[worker.slot] = None
        self._failures[worker.slot] += 1
        self._spawn_task(self._replace(worker.slot))

    async def _replace(self, slot: int) -> None:
        """A new worker in `slot` (if it exits too, `_exited` tries again, later)."""
        await asyncio.sleep(min(MAX_BACKOFF_S, 2.0 ** (self._failures[slot] - 1)))
        if self._slots[slot] is None:
            self._slots[slot] = await self._launch(slot)

    async def _restart_all(self) -> None:
        log.info("SIGHUP: replacing %d workers one by one", len(self._slots))
        for slot in range(len(self._slots)):
            new = await self._launch(slot)
            if not await new.ready:
                log.error("a new worker failed to start: the running workers keep serving")
                return
            old, self._slots[slot] = self._slots[slot], new  # (a crashed one's replacement too)
            if old is not None:
                old.stop()
        log.info("SIGHUP: every worker replaced")

    async def _stop_all(self) -> None:
        for sock in self._sockets:
            sock.close()  # the workers close theirs as they stop: no new connection waits
        workers = list(self._all)
        for worker in workers:
            worker.stop()
        waits = [worker.process.wait() for worker in workers]
        if not waits:
            return
        _, pending = await asyncio.wait(
            [asyncio.ensure_future(w) for w in waits], timeout=STOP_TIMEOUT_S
        )
        if pending:
            log.error("%d workers still running after %gs: killed", len(pending), STOP_TIMEOUT_S)
            for worker in workers:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.kill()
            await asyncio.gather(*pending)
        for worker in workers:
            worker.link.close()
