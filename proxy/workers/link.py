"""A worker's side of `--workers N`: what the supervisor handed it, and its line to the supervisor.

The supervisor starts each worker as `ctxproxy serve ... --worker LISTEN_FD,LINK_FD,DIR`: the
listening socket to accept on (inherited), one end of a socket pair to the supervisor, and the
private directory where the workers find each other's metrics (`proxy.workers.peers`). On the
link the worker says `ready` once it serves; when the link reads end-of-file the supervisor is
gone (even killed), and the worker stops as on SIGTERM: it finishes its requests and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

READY = b"ready\n"


@dataclass(frozen=True)
class WorkerRole:
    listen_fd: int
    link_fd: int
    directory: Path

    def argument(self) -> str:
        return f"{self.listen_fd},{self.link_fd},{self.directory}"

    @classmethod
    def parse(cls, value: str) -> WorkerRole:
        listen, link, directory = value.split(",", 2)
        return cls(int(listen), int(link), Path(directory))

    def listening_socket(self) -> socket.socket:
        return socket.socket(fileno=self.listen_fd)

    def link(self) -> SupervisorLink:
        return SupervisorLink(socket.socket(fileno=self.link_fd))


class SupervisorLink:
    """The worker's end of its socket pair with the supervisor."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._sock.setblocking(False)

    def ready(self) -> None:
        with contextlib.suppress(OSError):  # the supervisor is gone: `watch` stops us
            self._sock.send(READY)

    def watch(self, loop: asyncio.AbstractEventLoop, gone: Callable[[], None]) -> None:
        """Call `gone` once the supervisor's end is closed (it exited, or was killed)."""

        def readable() -> None:
            try:
                data = self._sock.recv(64)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(self._sock.fileno())
                gone()

        loop.add_reader(self._sock.fileno(), readable)

    def close(self, loop: asyncio.AbstractEventLoop) -> None:
        with contextlib.suppress(ValueError, OSError):  # closed already
            loop.remove_reader(self._sock.fileno())
        self._sock.close()
