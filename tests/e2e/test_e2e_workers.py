"""`ctxproxy serve --workers N` as an operator runs it: N processes on one port, on the Redis store.

Each test starts the real command as a subprocess in front of the fake upstream. Which worker
answered is in `x-ctxproxy-worker`; the kernel spreads new connections over the workers at
random, so the tests ask on new connections until they have seen each worker.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from fakes import FakeUpstream, Recorded, stream_chunks
from fakes.replies import encode_event
from workers_harness import (
    HANG_S,
    WORKER_HEADER,
    Served,
    redis_config,
    start_serve,
    worker_of,
    workers_seen,
)

from proxy.settings import usable_cpus

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "which worker?"}]}


@pytest.fixture
async def two_workers(
    tmp_path: Path, fake_upstream: FakeUpstream, redis_store_settings: dict[str, Any]
) -> AsyncIterator[Served]:
    config = redis_config(tmp_path / "c.yaml", redis_store_settings, fake_upstream.base_url)
    served = await start_serve("--config", str(config), "--port", "0", "--workers", "2")
    try:
        await served.wait_until_up()
        yield served
    finally:
        await served.stop()


async def _chat(url: str) -> int:
    """One chat completion on a connection of its own; the worker that answered it."""
    connector = aiohttp.TCPConnector(force_close=True)
    headers = {"Authorization": "Bearer sk-user"}
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.post(f"{url}/v1/chat/completions", json=CHAT, headers=headers) as response,
    ):
        assert response.status == 200, await response.text()
        assert (await response.json())["choices"][0]["message"]["content"] == "echo: which worker?"
        return int(response.headers[WORKER_HEADER])


def _sample(metrics: str, name: str, **labels: str) -> float:
    """The value of the one sample of `name` whose labels include `labels` (0 when absent)."""
    total = 0.0
    for line in metrics.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_both_workers_serve_and_every_scrape_sums_them(two_workers: Served) -> None:
    url = two_workers.url
    assert "workers=2" in two_workers.output
    served_by: dict[int, int] = {}
    while len(served_by) < 2 and sum(served_by.values()) < 400:
        pid = await _chat(url)
        served_by[pid] = served_by.get(pid, 0) + 1
    assert len(served_by) == 2, served_by
    sent = sum(served_by.values())
    scraped_by: set[int] = set()
    scrapes = 0
    while len(scraped_by) < 2 and scrapes < 400:
        pid, metrics = await worker_of(url, "/metrics")
        scraped_by.add(pid)
        scrapes += 1
        chats = _sample(metrics, "ctxproxy_requests_total", route="/v1/chat/completions")
        assert chats == sent, (pid, served_by, chats)
        assert _sample(metrics, "ctxproxy_upstream_latency_seconds_count") == sent
        assert _sample(metrics, "ctxproxy_preparations_total") == sent
    assert len(scraped_by) == 2, "every scrape above was answered by one worker"
    assert metrics.count("# TYPE ctxproxy_requests_total counter") == 1


async def test_healthz_names_the_worker(two_workers: Served) -> None:
    pids, _ = await workers_seen(two_workers.url, 2)
    assert len(pids) == 2
    pid, body = await worker_of(two_workers.url)
    assert f'"worker": {pid}' in body


@dataclass
class _GatedStream:
    """An SSE answer: its role chunk and first text at once, the rest once `gate` is set."""

    started: asyncio.Event
    gate: asyncio.Event

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        chunks = [encode_event(c) for c in stream_chunks(["first", " second", " third"])]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(chunks[0] + chunks[1])
        self.started.set()
        await self.gate.wait()
        for chunk in chunks[2:]:
            await response.write(chunk)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


async def _until_refused(url: str) -> None:
    """Until the port stops accepting connections."""
    while True:
        try:
            await worker_of(url)
        except aiohttp.ClientConnectionError:
            return
        await asyncio.sleep(0.05)


async def test_sigterm_lets_a_stream_in_flight_finish(
    two_workers: Served, fake_upstream: FakeUpstream
) -> None:
    gated = _GatedStream(asyncio.Event(), asyncio.Event())
    fake_upstream.enqueue(gated)
    headers = {"Authorization": "Bearer sk-user"}
    timeout = aiohttp.ClientTimeout(total=HANG_S)
    stream, url = {**CHAT, "stream": True}, f"{two_workers.url}/v1/chat/completions"
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(url, json=stream, headers=headers) as response,
    ):
        assert response.status == 200
        first = b""
        while b'"first"' not in first:  # the role chunk, then the first text
            first += await response.content.readuntil(b"\n\n")
        await asyncio.wait_for(gated.started.wait(), HANG_S)
        two_workers.signal(signal.SIGTERM)
        await two_workers.wait_for_line(lambda line: "stopping" in line, "stopping")
        await asyncio.wait_for(_until_refused(two_workers.url), HANG_S)
        assert two_workers.process.returncode is None, "exited with a stream in flight"
        gated.gate.set()
        rest = await response.content.read()
    assert b" second" in rest and b" third" in rest and rest.endswith(b"data: [DONE]\n\n")
    assert await two_workers.exit_code() == 0, two_workers.output
    assert "Traceback" not in two_workers.output


async def _until_gone(pids: set[int]) -> None:
    while pids:
        for pid in list(pids):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                pids.discard(pid)
        await asyncio.sleep(0.05)


async def test_sighup_replaces_the_workers_without_refusing_a_connection(
    two_workers: Served,
) -> None:
    url = two_workers.url
    before, asked = await workers_seen(url, 2)
    failures: list[BaseException] = []
    answered = 0
    replaced = asyncio.Event()

    async def keep_asking() -> None:
        nonlocal answered
        while not replaced.is_set():
            try:
                await worker_of(url)
                answered += 1
            except (aiohttp.ClientError, AssertionError) as exc:
                failures.append(exc)

    asking = asyncio.create_task(keep_asking())
    two_workers.signal(signal.SIGHUP)
    await two_workers.wait_for_line(lambda line: "every worker replaced" in line, "replaced")
    replaced.set()
    await asking
    assert not failures, failures[:3]
    await asyncio.wait_for(_until_gone(set(before)), HANG_S)  # the old ones finish and exit
    after, more = await workers_seen(url, 2)
    assert len(after) == 2 and not after & before, (before, after)
    _, metrics = await worker_of(url, "/metrics")
    healthz = _sample(metrics, "ctxproxy_requests_total", route="/healthz")
    assert healthz == asked + answered + more, "the old workers' counts left the sums"


async def test_the_memory_store_is_refused_with_two_workers_unless_allowed(
    fake_upstream: FakeUpstream,
) -> None:
    refused = await start_serve("--port", "0", "--workers", "2")
    assert await refused.exit_code() == 2
    [line] = refused.output.strip().splitlines()
    assert "server.workers: 2 workers on store.kind 'memory' would not share artifacts" in line
    assert "--allow-unshared-store" in line

    allowed = await start_serve("--port", "0", "--workers", "2", "--allow-unshared-store")
    try:
        await allowed.wait_until_up()
        pids, _ = await workers_seen(allowed.url, 2)
        assert len(pids) == 2
    finally:
        await allowed.stop()
    assert allowed.process.returncode == 0, allowed.output


def _two_cpus() -> set[int]:
    cpus = sorted(os.sched_getaffinity(0))
    if usable_cpus() < 2:
        pytest.skip("needs 2 CPUs (and a CPU quota of 2 or more) for `auto` to mean 2 workers")
    return set(cpus[:2])


async def test_auto_starts_one_worker_per_usable_cpu(
    tmp_path: Path, fake_upstream: FakeUpstream, redis_store_settings: dict[str, Any]
) -> None:
    cpus = _two_cpus()
    path = redis_config(tmp_path / "c.yaml", redis_store_settings, fake_upstream.base_url)
    path.write_text(path.read_text().replace("server: {", "server: {workers: auto, "))
    served = await start_serve(
        "--config", str(path), "--port", "0", preexec_fn=lambda: os.sched_setaffinity(0, cpus)
    )
    try:
        line = await served.wait_until_up()
        assert "workers=2" in line
        pids, _ = await workers_seen(served.url, 2)
        assert len(pids) == 2
        more, _ = await workers_seen(served.url, 3, tries=40)  # a third would answer too
        assert more == pids
    finally:
        await served.stop()



async def test_a_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        served = await start_serve("--port", port, "--workers", "2", "--allow-unshared-store")
        assert await served.exit_code() == 2
    [line] = served.output.strip().splitlines()
    assert f"server.host/port: cannot listen on 127.0.0.1:{port}" in line, served.output
