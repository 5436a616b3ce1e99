"""`ctxproxy serve` as a separate process on a free loopback port, for tests of several replicas.

The process writes its output to a log file (shown when it fails to come up); `start` returns once
`/readyz` answers 200 (store reachable, policies loaded), `stop` sends SIGTERM and waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

import aiohttp
from redis_process import free_port

START_S = 120.0
"""Bounds how long a test waits for the server to come up or stop: only a broken server takes
it (start-up loads the tokenizers, which takes seconds on a loaded machine)."""


class ServedProxy:
    """One `ctxproxy serve --config <config> --port <free port>` process."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config = config
        self.log = log
        self.port = free_port()
        self._process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    async def start(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        args = ["-m", "proxy.cli", "serve", "--config", str(self.config), "--port", str(self.port)]
        with self.log.open("ab") as out:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, *args, env=env, stdout=out, stderr=asyncio.subprocess.STDOUT
            )
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_S
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                assert self._process is not None
                if self._process.returncode is not None:
                    raise AssertionError(f"{self.url} exited:\n{self.output()}")
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"{self.url}/readyz") as response:
                        if response.status == 200:
                            return
                await asyncio.sleep(0.1)
        raise AssertionError(f"{self.url} not ready after {START_S} s:\n{self.output()}")

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no output)"

    async def stop(self) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), START_S)
        except TimeoutError:
            process.kill()
            await process.wait()
