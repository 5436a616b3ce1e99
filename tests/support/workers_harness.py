"""`ctxproxy serve --workers N` as a subprocess for the e2e tests: start it, read its output as it
comes (so that its pipe never fills), find its port, ask which worker answered, stop it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

HANG_S = 120.0
"""Bounds every wait: only a broken server takes it (workers load tokenizers as they start)."""
WORKER_HEADER = "x-ctxproxy-worker"
_LISTENING = re.compile(r"listening on (http://[\d.]+:\d+)")


class Served:
    """A running `ctxproxy serve` and everything it printed so far."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._printed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())
        self.url = ""

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.lines.append(line.decode(errors="replace"))
            self._printed.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    async def wait_for_line(self, wanted: Callable[[str], bool], what: str) -> str:
        """The first printed line `wanted` accepts (failing with the output if it exits first)."""

        async def seen() -> str:
            checked = 0
            while True:
                for line in self.lines[checked:]:
                    if wanted(line):
                        return line
                checked = len(self.lines)
                if self._reader.done():
                    raise AssertionError(f"exited before {what}:\n{self.output}")
                self._printed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._printed.wait(), 1.0)

        return await asyncio.wait_for(seen(), HANG_S)

    async def wait_until_up(self) -> str:
        line = await self.wait_for_line(lambda text: "listening on" in text, "listening")
        match = _LISTENING.search(line)
        assert match is not None, line
        self.url = match.group(1)
        return line

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def exit_code(self) -> int:
        code = await asyncio.wait_for(self.process.wait(), HANG_S)
        await asyncio.wait_for(self._reader, HANG_S)
        return code

    async def stop(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
        await self.exit_code()


async def start_serve(*args: str, **popen: Any) -> Served:
    """`python -m proxy.cli serve ARGS`, its stderr in its stdout."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        *args,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        **popen,
    )
    return Served(process)


def redis_config(path: Path, store: dict[str, Any], upstream_url: str, extra: str = "") -> Path:
    """A config file on the given Redis `store` settings, in front of `upstream_url`."""
    path.write_text(
        "server: {log_format: text}\n"
        f"store: {{kind: redis, url: '{store['url']}', key_prefix: '{store['key_prefix']}', "
        f"secret: '{store['secret']}'}}\n"
        f"upstreams: [{{name: fake, base_url: '{upstream_url}'}}]\n" + extra
    )
    return path


async def worker_of(url: str, path: str = "/healthz") -> tuple[int, str]:
    """GET `path` on a connection of its own: (the answering worker's pid, the body)."""
    connector = aiohttp.TCPConnector(force_close=True)
    timeout = aiohttp.ClientTimeout(total=HANG_S)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
        session.get(f"{url}{path}") as response,
    ):
        assert response.status == 200, await response.text()
        return int(response.headers[WORKER_HEADER]), await response.text()


async def workers_seen(url: str, count: int, tries: int = 400) -> tuple[set[int], int]:
    """Asks `/healthz` on new connections until `count` distinct workers answered; returns them
    and the number of requests it took (the kernel spreads connections at random)."""
    seen: set[int] = set()
    sent = 0
    while len(seen) < count and sent < tries:
        pid, _ = await worker_of(url)
        sent += 1
        seen.add(pid)
    return seen, sent
