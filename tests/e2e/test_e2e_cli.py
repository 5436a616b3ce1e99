"""`ctxproxy serve` as a user runs it: the embedded default in front of an upstream."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator

import aiohttp
import openai
import pytest
from fakes import FakeUpstream


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def served(fake_upstream: FakeUpstream) -> AsyncIterator[str]:
    port = free_port()
    env = {**os.environ, "OPENAI_BASE_URL": fake_upstream.base_url}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        "--port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_up(url)
        yield url
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 10)


async def wait_until_up(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(200):
            try:
                async with session.get(f"{url}/healthz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.05)
    raise TimeoutError(f"{url} did not come up")


async def test_serve_on_embedded_default(served: str, fake_upstream: FakeUpstream) -> None:
    async with aiohttp.ClientSession() as session, session.get(f"{served}/readyz") as response:
        assert response.status == 200
        assert (await response.json())["store"] is True
    async with openai.AsyncOpenAI(
        base_url=f"{served}/v1", api_key="sk-user", max_retries=0
    ) as client:
        reply = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "through the cli"}]
        )
    assert reply.choices[0].message.content == "echo: through the cli"
    assert fake_upstream.last.headers["Authorization"] == "Bearer sk-user"


async def test_serve_refuses_a_broken_config(tmp_path: object) -> None:
    from pathlib import Path

    config = Path(str(tmp_path)) / "c.yaml"
    config.write_text("server: {prot: 1}\n")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    assert f"{config}: server.prot: unknown key" in err.decode()
