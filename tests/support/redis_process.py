"""A private, throwaway `redis-server` process for fault tests.

The shared Redis on 127.0.0.1:6379 is never touched: each `RedisProcess` runs its own server on a
free loopback port, without persistence, and can be stopped (SIGTERM), killed (SIGKILL), paused
(SIGSTOP: the kernel still accepts connections but nothing answers) and resumed (SIGCONT), then
started again on the same port. `require_redis_server()` applies the suite's availability rule:
without the binary the tests FAIL under CI and SKIP with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

READY_TIMEOUT_S = 60.0
"""Only bounds a hang: an exited server fails at once, a live one answers within ms."""
STOP_TIMEOUT_S = 5.0


def ci_requires_services() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_redis_server() -> str:
    """Path of `redis-server`; fails under CI and skips otherwise when it is not installed."""
    binary = os.environ.get("CTXPROXY_TEST_REDIS_SERVER") or shutil.which("redis-server")
    if binary:
        return binary
    problem = "redis-server is not installed (or set CTXPROXY_TEST_REDIS_SERVER)"
    if ci_requires_services():
        pytest.fail(f"{problem}; CI is set, so the store fault tests must run", pytrace=False)
    pytest.skip(f"{problem}; install redis-server to run the store fault tests")


def free_port() -> int:
    """A loopback port that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ping(port: int, timeout: float = 0.5) -> bool:
    """True when something on 127.0.0.1:port answers PING like Redis."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisProcess:
    """One private redis-server on a fixed port (chosen free at construction)."""

    def __init__(
        self, binary: str, port: int | None = None, extra_args: tuple[str, ...] = ()
    ) -> None:
        self.binary = binary
        self.port = free_port() if port is None else port
        self.extra_args = extra_args
        """More `redis-server` arguments (e.g. cluster mode: tests/support/redis_cluster.py)."""
        self._dir = Path(tempfile.mkdtemp(prefix="ctxproxy-redis-"))
        self._log_path = self._dir / "redis.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        atexit.register(self.cleanup)  # last resort if a test process dies before its fixture

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def directory(self) -> Path:
        """The server's working directory (its log; a cluster node's nodes.conf)."""
        return self._dir

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the server on `self.port` and wait until it answers PING."""
        if self.running:
            raise RuntimeError(f"redis-server on port {self.port} is already running")
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self._dir),
            "--daemonize",
            "no",
            *self.extra_args,
        ]
        with self._log_path.open("ab") as log:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self._paused = False
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if ping(self.port, timeout=0.2):
                return
            if self._proc is not None and self._proc.poll() is not None:
                break
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(
            f"redis-server did not answer PING on port {self.port}: {self.log_tail()}"
        )

    def stop(self) -> None:
        """Graceful shutdown (SIGTERM; nothing is saved); SIGKILL if it does not exit in time."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        if self._paused:
            self.resume()
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the server vanishes at once (works on a paused process too)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)
        self._paused = False

    def pause(self) -> None:
        """SIGSTOP: connections are still accepted by the kernel but nothing answers."""
        self._signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT after `pause()`."""
        self._signal(signal.SIGCONT)
        self._paused = False

    def restart(self) -> None:
        """Start again on the same port after a stop or a kill (the data is gone)."""
        self.kill()
        self.start()

    async def restart_async(self) -> None:
        """`restart()` off the event loop, so a proxy in the same loop keeps serving meanwhile."""
        await asyncio.to_thread(self.restart)

    def cleanup(self) -> None:
        """Kill the server and remove its directory; safe to call any number of times."""
        self.kill()
        shutil.rmtree(self._dir, ignore_errors=True)
        atexit.unregister(self.cleanup)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self._log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def _signal(self, sig: signal.Signals) -> None:
        if not self.running:
            raise RuntimeError(f"redis-server on port {self.port} is not running")
        assert self._proc is not None
        self._proc.send_signal(sig)
