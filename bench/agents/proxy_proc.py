"""The proxy under test: `python -m proxy.cli serve` from a source tree, in a subprocess.

Its config: the memory store, passthrough auth (the default policy), JSON logs, two upstreams on
the fake (kind `openai` on `<fake>/v1`, the default route, and kind `anthropic` for `claude-*`).
Its stderr goes to a file; `access_lines()` parses the `ctxproxy.access` lines from it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = """\
server:
  host: 127.0.0.1
  port: {port}
  log_format: json
  log_level: INFO
store:
  kind: memory
upstreams:
  - name: fake-openai
    kind: openai
    base_url: {fake}/v1
  - name: fake-anthropic
    kind: anthropic
    base_url: {fake}
routes:
  - model: "claude-*"
    upstream: fake-anthropic
auth:
  mode: passthrough
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ProxyProcess:
    def __init__(self, workdir: Path, fake_url: str, source: Path = REPO_ROOT) -> None:
        self.workdir = workdir
        self.fake_url = fake_url
        self.source = source
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = workdir / "ctxproxy.yaml"
        self.stderr_path = workdir / "proxy.stderr.jsonl"
        self._proc: asyncio.subprocess.Process | None = None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.source), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
        return env

    async def module_path(self) -> str:
        """Where `proxy` is imported from with this environment (the source tree under test)."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import proxy; print(proxy.__file__)",
            env=self.env(),
            cwd=self.source,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        return out.decode().strip()

    async def start(self) -> None:
        self.config.write_text(CONFIG.format(port=self.port, fake=self.fake_url))
        stderr = self.stderr_path.open("wb")
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "proxy.cli",
            "serve",
            "--config",
            str(self.config),
            env=self.env(),
            cwd=self.source,  # `-m` puts the working directory first on sys.path
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr,
        )
        stderr.close()
        await self._wait_ready()

    async def _wait_ready(self, seconds: float = 60.0) -> None:
        async with aiohttp.ClientSession() as session:
            for _ in range(int(seconds * 10)):
                if self._proc is not None and self._proc.returncode is not None:
                    break
                try:
                    async with session.get(self.url + "/healthz") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        tail = self.stderr_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the proxy did not start on {self.url}:\n{tail}")

    async def stop(self) -> None:
        if self._proc is None or self._proc.returncode is not None:
            return
        self._proc.terminate()
        try:
            await asyncio.wait_for(self._proc.wait(), 15)
        except TimeoutError:
            self._proc.kill()
            await self._proc.wait()

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.stderr_path.read_text(errors="replace").splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                value = {"message": line}
            lines.append(value if isinstance(value, dict) else {"message": line})
        return lines

    def access_lines(self) -> dict[str, dict[str, Any]]:
        """The access lines by request id."""
        return {
            line["request_id"]: line
            for line in self.log_lines()
            if line.get("logger") == "ctxproxy.access" and "request_id" in line
        }
