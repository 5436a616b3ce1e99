"""`ctxproxy serve` as a user runs it: the embedded default in front of an upstream."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
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


HANG_S = 120.0
"""Bounds how long a test waits for the server to start or stop: only a broken server takes it
(the start-up loads the tokenizers, which takes seconds on a loaded machine)."""
UNBUFFERED = {"PYTHONUNBUFFERED": "1"}  # each line of the server's output as it is printed


@pytest.fixture
async def served(fake_upstream: FakeUpstream) -> AsyncIterator[str]:
    port = free_port()
    env = {**os.environ, **UNBUFFERED, "OPENAI_BASE_URL": fake_upstream.base_url}
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
        await wait_until_up(process, url)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):  # exited already
            process.terminate()
        await asyncio.wait_for(process.communicate(), HANG_S)


async def wait_until_up(process: asyncio.subprocess.Process, url: str) -> str:
    """Waits for the server's `listening on` line (failing with its output if it exits first),
    then for one `/healthz` answer; returns what it printed until then."""
    assert process.stdout is not None
    printed: list[str] = []

    async def listening() -> None:
        while not printed or "listening on" not in printed[-1]:
            line = await process.stdout.readline()  # type: ignore[union-attr]
            if not line:
                raise AssertionError(f"{url} exited before listening:\n{''.join(printed)}")
            printed.append(line.decode())

    await asyncio.wait_for(listening(), HANG_S)
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=HANG_S)) as session,
        session.get(f"{url}/healthz") as response,
    ):
        assert response.status == 200, "".join(printed)
    return "".join(printed)


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
    _, err = await asyncio.wait_for(process.communicate(), HANG_S)
    assert process.returncode == 2
    assert f"{config}: server.prot: unknown key (did you mean 'port'?)" in err.decode()


async def run_serve(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        "--port",
        "0",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(), HANG_S)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


START_UP_MISTAKES = [
    ("tenants: [{name: a, policy: nope}]\n", "tenants.0.policy"),
    ("policies_dir: /nonexistent/policies\n", "policies_dir"),
    ("policies_dir: relative-and-missing\n", "policies_dir"),
    ("store: {kind: redis, url: 'http://127.0.0.1:6379'}\n", "store.url"),
    (
        "upstreams: [{name: a, base_url: 'http://127.0.0.1:9', api_key: sk-op-Zx12test}]\n",
        "upstreams.0.api_key",
    ),
    ("tenants: [{name: a, keys: [k]}, {name: a}]\n", "tenants.1.name"),
    ("server:\n  port: [1,\n", "invalid YAML"),
]


@pytest.mark.parametrize(("config_text", "key"), START_UP_MISTAKES)
async def test_serve_start_up_mistakes_are_one_line_and_exit_2(
    tmp_path: object, config_text: str, key: str
) -> None:
    from pathlib import Path

    config = Path(str(tmp_path)) / "c.yaml"
    config.write_text(config_text)
    code, out, err = await run_serve("--config", str(config))
    lines = err.strip().splitlines()
    assert code == 2, (out, err)
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{config}: ") and key in lines[0], err
    assert "Traceback" not in err and "Unclosed" not in err and "sk-op-Zx12test" not in err


async def test_serve_prints_a_summary_and_warns_about_tenants_without_upstream_key(
    tmp_path: object, fake_upstream: FakeUpstream
) -> None:
    from pathlib import Path

    config = Path(str(tmp_path)) / "c.yaml"
    port = free_port()
    config.write_text(
        f"server: {{port: {port}, log_format: text}}\n"
        f"upstreams: [{{name: fake, base_url: '{fake_upstream.base_url}'}}]\n"
        "auth: {mode: keys}\n"
        "tenants: [{name: acme, keys: [sk-proxy-Rt45test], upstream_key: sk-up-Gh67test},"
        " {name: beta, keys: [sk-proxy-Jk89test]}]\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        "--config",
        str(config),
        env={**os.environ, **UNBUFFERED},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output = ""
    try:
        output = await wait_until_up(process, f"http://127.0.0.1:{port}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # exited already
            process.terminate()
        output += (await asyncio.wait_for(process.communicate(), HANG_S))[0].decode()
    [summary] = [line for line in output.splitlines() if "listening on" in line]
    for part in (
        "store=memory",
        "upstreams=fake",
        "auth=keys",
        "policies=",
        "coding-agent",
        "tenants=acme,beta",
    ):
        assert part in summary, summary
    [warning] = [line for line in output.splitlines() if "WARNING" in line]
    assert "tenant 'beta'" in warning and "Authorization" in warning
    for secret in ("Rt45test", "Gh67test", "Jk89test"):
        assert secret not in output


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_serve_stops_cleanly_on_a_signal(fake_upstream: FakeUpstream, signum: int) -> None:
    port = free_port()
    env = {**os.environ, **UNBUFFERED, "OPENAI_BASE_URL": fake_upstream.base_url}
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
    output = ""
    try:
        output = await wait_until_up(process, f"http://127.0.0.1:{port}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # exited already
            process.send_signal(signum)
        output += (await asyncio.wait_for(process.communicate(), HANG_S))[0].decode()
    assert process.returncode == 0, output
    assert f"listening on http://127.0.0.1:{port}" in output
    assert "Traceback" not in output


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
async def test_serve_on_the_chosen_event_loop(
    fake_upstream: FakeUpstream, tmp_path: object, loop: str
) -> None:
    """`server.event_loop` picks the loop (uvloop is installed with the dev extra): the
    listening line names it and a request goes through on it."""
    from pathlib import Path

    port = free_port()
    config = Path(str(tmp_path)) / "c.yaml"
    config.write_text(
        f"server: {{event_loop: {loop}}}\n"
        f"upstreams: [{{name: fake, base_url: '{fake_upstream.base_url}'}}]\n"
    )
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "proxy.cli", "serve", "--config", str(config)),
        *("--port", str(port)),
        env={**os.environ, **UNBUFFERED},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        printed = await wait_until_up(process, url)
        async with openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key="sk-user", max_retries=0
        ) as client:
            reply = await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": f"on {loop}"}]
            )
    finally:
        with contextlib.suppress(ProcessLookupError):  # exited already
            process.terminate()
        await asyncio.wait_for(process.communicate(), HANG_S)
    assert f"event_loop={loop}" in printed
    assert reply.choices[0].message.content == f"echo: on {loop}"
