"""Processes of the overhead benchmark: start, pin, wait until ready, measure (/proc), stop.

Every process is started in its own session (process group) so that stopping it also stops
whatever it spawned; `Processes.stop_all()` runs on every exit path of the benchmark.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tree(pid: int) -> list[int]:
    """`pid` and all its descendants (via /proc/<pid>/task/<tid>/children)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                text = Path(f"/proc/{current}/task/{tid}/children").read_text()
            except OSError:
                continue
            todo.extend(int(child) for child in text.split())
    return out


def status_kb(pid: int, field_name: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of the given processes (all their threads)."""
    ticks = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / CLK_TCK


def pin(pid: int, cpus: set[int] | None) -> None:
    """Pin every thread of every process of the tree to `cpus`."""
    if not cpus:
        return
    for proc in tree(pid):
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{proc}/task")]
        except OSError:
            continue
        for tid in tids:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cpus)


def http_request(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    finally:
        conn.close()


@dataclass
class Server:
    name: str
    argv: list[str]
    port: int
    cpus: set[int] | None = None
    env: dict[str, str] = field(default_factory=dict)
    ready_path: str = "/"
    ready_timeout: float = 30.0
    log: Path | None = None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, cwd: Path) -> None:
        out = open(self.log, "wb") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.argv,
            cwd=cwd,
            env={**os.environ, **self.env},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        pin(self.proc.pid, self.cpus)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                code = self.proc.returncode
                raise RuntimeError(f"{self.name} exited with {code}; {self._tail()}")
            try:
                status, _, _ = http_request(self.port, "GET", self.ready_path, timeout=2)
                if status < 500:
                    pin(self.pid, self.cpus)  # threads started since launch
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready after {self.ready_timeout:g}s; {self._tail()}")

    def _tail(self) -> str:
        if not self.log or not self.log.exists():
            return "no log"
        lines = self.log.read_text(errors="replace").splitlines()[-15:]
        return f"log {self.log}:\n" + "\n".join(lines)

    def rss_kb(self) -> int:
        return sum(status_kb(p, "VmRSS") for p in tree(self.pid))

    def hwm_kb(self) -> int:
        return sum(status_kb(p, "VmHWM") for p in tree(self.pid))

    def cpu(self) -> float:
        return cpu_seconds(tree(self.pid))

    def quiesce(self, max_wait: float, idle: float = 0.3) -> float:
        """Wait until the process tree uses (almost) no CPU for `idle` seconds; returns the wait."""
        start = time.monotonic()
        last = self.cpu()
        while time.monotonic() - start < max_wait:
            time.sleep(idle)
            now = self.cpu()
            if now - last <= 0.1 * idle:  # under 10% of one CPU
                break
            last = now
        return time.monotonic() - start

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


@dataclass
class RssSampler:
    """Samples VmRSS (kB) of each server every `period` seconds, tagged with the current phase."""

    servers: list[Server]
    period: float = 0.25
    phase: str = "startup"
    samples: dict[str, list[tuple[float, str, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.wait(self.period):
            for server in self.servers:
                if server.proc is not None and server.proc.poll() is None:
                    sample = (time.monotonic() - t0, self.phase, server.rss_kb())
                    self.samples.setdefault(server.name, []).append(sample)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


class Processes:
    """Owns every process the benchmark starts; `stop_all()` is idempotent."""

    def __init__(self) -> None:
        self.servers: list[Server] = []
        self.children: list[subprocess.Popen[bytes]] = []

    def add(self, server: Server) -> Server:
        self.servers.append(server)
        return server

    def run(
        self, argv: list[str], cpus: set[int] | None, env: dict[str, str], timeout: float
    ) -> str:
        """Run a load generator to completion (killed on timeout); returns its stdout."""
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env},
            start_new_session=True,
        )
        self.children.append(proc)
        pin(proc.pid, cpus)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        except BaseException:  # Ctrl-C, SIGTERM: never leave the load generator running
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            self.children.remove(proc)
        if proc.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({proc.returncode}): {err.decode()[-2000:]}")
        return out.decode()

    def stop_all(self) -> None:
        for proc in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for server in reversed(self.servers):
            server.stop()
