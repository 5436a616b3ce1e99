"""Compressed bodies both ways: `/healthz` latency while bombs are sent to and through the proxy.

    python -m bench.hostile.compression [--codings gzip,deflate,br] [--repeat 3]
                                        [--request-mib 1024] [--answer-mib 2048] [--ctxproxy PATH]

Starts `ctxproxy serve` (the console script next to this Python, or `--ctxproxy`) on a free
loopback port, auth mode `keys` (tenant `tiny`, whose policy offloads tool results over 300
characters, so that a chat completion carrying one runs the proxy's read loop) in front of a
fake upstream run by this script on another loopback port. A prober *process* sends `GET
/healthz` over one keep-alive connection, 20 ms after each answer, for the whole of each phase
(a probe not answered within 2 s counts at the time it took and reopens the connection). Each
phase, once per coding, sends `--repeat` requests one at a time:

- `req-unauth`: `POST /v1/chat/completions`, no key, `Content-Encoding: <coding>`, a body that
  inflates to `--request-mib` MiB of zeros (1 MB for gzip); expected 401.
- `req-healthz`: the same body on `GET /healthz`; expected 200 (a probe reads no body).
- `req-auth`: the same body with the tenant's key; expected 413 (`server.max_body_bytes`).
- `ans-relay`: `GET /v1/models` (relayed as it is), the upstream answering `--answer-mib` MiB
  of zeros in `<coding>` (2 MB for gzip); the client reads it raw, to its end.
- `ans-read`: a chat completion the proxy must read (its read tools are on), the upstream
  answering the same bomb; expected 502 `upstream_response_too_large`.

Per phase: probes answered/sent, /healthz p50/p99/max, the status codes (a 502 typed
`upstream_response_too_large` is the proxy's answer to an upstream's bomb; a 500 is the proxy's
own failure), the bytes the client read, the proxy's RSS after the phase and its peak, and the
ERROR/Traceback lines of its log. Loopback only; every request has a deadline (`--timeout`).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

import aiohttp
from bombs import MIB, bomb
from fakes import FakeUpstream, Recorded, completion, json_reply

from bench.common.ctxproxy_server import free_port
from bench.hostile.server import KEYS, proxy_config, running_proxy

PROBE_PAUSE_S = 0.02
PROBE_TIMEOUT_S = 2.0
BOMB_HEADER = "x-bench-bomb"
READ_BACK_BYTES = 1 << 16


# -- the prober (its own process: the attacks' work in this one never delays a probe) -----------


def _probe(port: int, stop: Any, out: Connection) -> None:
    import http.client

    latencies: list[float] = []
    failures = 0
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT_S)
    while not stop.is_set():
        started = time.perf_counter()
        try:
            connection.request("GET", "/healthz")
            response = connection.getresponse()
            response.read()
            failures += response.status != 200
        except OSError:
            failures += 1
            connection.close()
        latencies.append(time.perf_counter() - started)
        stop.wait(PROBE_PAUSE_S)
    connection.close()
    out.send((latencies, failures))


@contextmanager
def probing(port: int) -> Iterator[list[tuple[list[float], int]]]:
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_probe, args=(port, stop, sender), daemon=True)
    process.start()
    time.sleep(0.5)
    result: list[tuple[list[float], int]] = []
    try:
        yield result
    finally:
        time.sleep(0.3)
        stop.set()
        if receiver.poll(30):
            result.append(receiver.recv())
        process.join(10)


# -- the fake upstream's bombs ----------------------------------------------------------------


def bomb_script(answer_bytes: int) -> Any:
    def reply(record: Recorded) -> Any:
        coding = record.headers.get(BOMB_HEADER)
        if coding:  # sent as it is: aiohttp compresses nothing itself
            return json_reply(bomb(coding, answer_bytes), headers={"Content-Encoding": coding})
        return completion("ok")

    return reply


# -- the phases -------------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    read_bytes: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    probes_failed: int = 0
    rss_mb: float = float("nan")
    peak_mb: float = float("nan")

    def row(self) -> str:
        ordered = sorted(self.latencies) or [float("nan")]

        def ms(q: float) -> str:
            return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.1f}"

        answered = len(self.latencies) - self.probes_failed
        statuses = ", ".join(f"{k}x{v}" for k, v in sorted(self.statuses.items()))
        most = max(self.read_bytes, default=0) / MIB
        fives = sum(v for k, v in self.statuses.items() if k.startswith("5"))
        internal = sum(v for k, v in self.statuses.items() if k.startswith("500"))
        return (
            f"| {self.name} | {answered}/{len(self.latencies)} | {ms(0.5)} | {ms(0.99)} | "
            f"{ordered[-1] * 1000:.1f} | {statuses} | {most:.1f} | {self.rss_mb:.0f} | "
            f"{self.peak_mb:.0f} | {fives} | {internal} |"
        )


def chat_body(tool_chars: int = 0) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read it and answer."}]
    if tool_chars:
        function = {"name": "fetch", "arguments": "{}"}
        call = {"id": "call_1", "type": "function", "function": function}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "page " * (tool_chars // 5)},
            {"role": "user", "content": "What does it say?"},
        ]
    return {"model": "gpt-4.1", "messages": messages}


async def send(
    session: aiohttp.ClientSession, method: str, url: str, timeout: float, **kwargs: Any
) -> tuple[str, int]:
    """(status and error code, or the client's failure; bytes of the body as it came)."""
    try:
        async with asyncio.timeout(timeout):
            async with session.request(method, url, **kwargs) as response:
                size, head = 0, b""
                async for chunk in response.content.iter_chunked(READ_BACK_BYTES):
                    head = head or chunk
                    size += len(chunk)
                return f"{response.status}{_code(response.status, head)}", size
    except TimeoutError:
        return "timeout", 0
    except aiohttp.ClientError as exc:
        return type(exc).__name__, 0


def _code(status: int, head: bytes) -> str:
    if status < 400:
        return ""
    try:
        error = json.loads(head)["error"]
        own = error.get("ctxproxy") if isinstance(error.get("ctxproxy"), dict) else {}
        return f" {error.get('code') or own.get('code') or error.get('type')}"
    except (ValueError, KeyError, TypeError):
        return ""


def requests_of(
    phase: str, coding: str, base: str, request_bytes: int
) -> tuple[str, str, dict[str, Any]]:
    key = {"Authorization": f"Bearer {KEYS['tiny']}"}
    if phase.startswith("req"):
        headers = {"Content-Encoding": coding, "Content-Type": "application/json"}
        data = bomb(coding, request_bytes)
        if phase == "req-healthz":
            return "GET", f"{base}/healthz", {"data": data, "headers": headers}
        if phase == "req-auth":
            headers |= key
        return "POST", f"{base}/v1/chat/completions", {"data": data, "headers": headers}
    headers = {**key, BOMB_HEADER: coding, "Accept-Encoding": "gzip, deflate, br"}
    if phase == "ans-relay":
        return "GET", f"{base}/v1/models", {"headers": headers}
    return "POST", f"{base}/v1/chat/completions", {"json": chat_body(2000), "headers": headers}


def proc_mb(pid: int) -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


async def run_phase(
    name: str, coding: str, args: argparse.Namespace, port: int, pid: int
) -> Phase:
    phase = Phase(f"{name} {coding}")
    base = f"http://127.0.0.1:{port}"
    session = aiohttp.ClientSession(auto_decompress=False)
    try:
        with probing(port) as probes:
            for _ in range(args.repeat):
                method, url, kwargs = requests_of(name, coding, base, args.request_mib * MIB)
                status, size = await send(session, method, url, args.timeout, **kwargs)
                phase.statuses[status] += 1
                phase.read_bytes.append(size)
    finally:
        await session.close()
    if probes:
        phase.latencies, phase.probes_failed = probes[0]
    phase.rss_mb, phase.peak_mb = proc_mb(pid)
    return phase


PHASES = ("req-unauth", "req-healthz", "req-auth", "ans-relay", "ans-read")
HEADER = (
    "| phase | probes ok/sent | /healthz p50 ms | p99 ms | max ms | statuses | most read MiB "
    "| RSS MiB after | peak RSS MiB | 5xx | of them 500 |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


async def bomb_phases(
    args: argparse.Namespace, log_lines: collections.Counter[str]
) -> tuple[list[Phase], list[Recorded]]:
    """Every phase once per coding against one proxy; (the phases, what the upstream received)."""
    codings = args.codings.split(",")
    for coding in codings:  # built before any probe: building them is this process's work
        bomb(coding, args.request_mib * MIB)
        bomb(coding, args.answer_mib * MIB)
    phases: list[Phase] = []
    async with FakeUpstream(default=bomb_script(args.answer_mib * MIB)) as upstream:
        with tempfile.TemporaryDirectory(prefix="ctxproxy-compression-") as tmp:
            port = free_port()
            config = proxy_config("keys", port, upstream.base_url, None, Path(tmp))
            with running_proxy(args.ctxproxy, config, port, log_lines) as server:
                for name in PHASES:
                    for coding in codings:
                        phases.append(await run_phase(name, coding, args, port, server.proc.pid))
                        print(phases[-1].row(), flush=True)
    return phases, list(upstream.received)


async def main_async(args: argparse.Namespace) -> int:
    log_lines: collections.Counter[str] = collections.Counter()
    phases, _ = await bomb_phases(args, log_lines)
    print(f"\n{HEADER}\n" + "\n".join(phase.row() for phase in phases))
    problems = ", ".join(f"{k} x{v}" for k, v in log_lines.items()) or "none"
    print(f"\nproxy log: {problems}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The bombs' options (`bench.hostile.round_two` takes them too)."""
    parser.add_argument("--codings", default="gzip,deflate,br")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--request-mib", type=int, default=1024)
    parser.add_argument("--answer-mib", type=int, default=2048)
    parser.add_argument("--timeout", type=float, default=120.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--ctxproxy", default=None, help="the ctxproxy console script to run")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
