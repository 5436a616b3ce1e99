"""A `ctxproxy serve` subprocess on a free loopback port, shared by the hostile runs, the
availability run and the dry-run snapshot.

`ctxproxy_command` finds the console script (the one next to this Python, else on PATH, unless
given); `Server` starts it in its own session with the environment minus `CTXPROXY_*` (plus the
caller's `env`, e.g. a `PYTHONPATH` naming another checkout), its output in a log file, waits
until `/healthz` answers 200 and stops the whole process group.
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ctxproxy_command(explicit: str | None) -> list[str]:
    if explicit:
        return [explicit]
    script = Path(sys.executable).parent / "ctxproxy"
    if script.exists():
        return [str(script)]
    found = shutil.which("ctxproxy")
    if found:
        return [found]
    raise SystemExit("no `ctxproxy` console script next to this Python or on PATH (--ctxproxy)")


class Server:
    def __init__(
        self, argv: list[str], port: int, log: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.port = port
        self.log = log
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("CTXPROXY_")}
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**inherited, **(env or {})},
                start_new_session=True,
            )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"ctxproxy exited with {self.proc.returncode}:\n{self._tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
                conn.close()
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"ctxproxy not ready after {timeout:g}s:\n{self._tail()}")

    def _tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(10)
                return
            except ProcessLookupError:
                return
            except subprocess.TimeoutExpired:
                continue
