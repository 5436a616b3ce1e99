"""Sustained load: a mixed workload at a fixed rate against `ctxproxy serve`, with Redis.

    python -m bench.soak                 # 10 minutes at 20 requests/s
    python -m bench.soak --quick         # 1 minute

Every request kind the proxy handles, in rotation: passthrough, offload, drop, refuse (expects
400 context_length_exceeded), streaming, and a synthetic read round (the upstream calls
`read_context_artifact`, the proxy executes it and asks again). Open loop: requests start on a
fixed schedule whatever the latency. Reports unexpected answers, latency per minute (p50/p99),
and the proxy's RSS and open file descriptors sampled every 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import aiohttp
import orjson

HERE = Path(__file__).resolve().parent
POLICY = "budget: {context_window: 12000, reserved_output: 1000, safety_margin: 0}\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tool_turn(i: int, chars: int) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": f'{{"path": "f{i}"}}'},
    }
    text = "".join(f"{i}:{n} value={(n * 7919) % 10007}\n" for n in range(chars // 20))
    return [
        {"role": "user", "content": f"step {i}"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": text},
        {"role": "assistant", "content": f"done {i}"},
    ]


def bodies(seed: int) -> dict[str, tuple[dict[str, Any], int]]:
    """Request kind -> (body, expected status)."""
    system = {"role": "system", "content": f"You are agent {seed}."}
    small = [system, {"role": "user", "content": "hello"}]
    offload = [system, *tool_turn(0, 30_000), {"role": "user", "content": "summarise"}]
    long = [system] + [m for i in range(60) for m in tool_turn(i, 1_500)]
    huge = [system, {"role": "user", "content": "word " * 20_000}]
    return {
        "passthrough": ({"model": "gpt-4o", "messages": small}, 200),
        "offload": ({"model": "gpt-4o", "messages": offload}, 200),
        "drop": ({"model": "gpt-4o", "messages": long}, 200),
        "refuse": ({"model": "gpt-4o", "messages": huge}, 400),
        "stream": ({"model": "gpt-4o", "messages": small, "stream": True}, 200),
        "synthetic": ({"model": "gpt-4o", "messages": offload, "stream": True}, 200),
    }


class Procs:
    def __init__(self, redis_port: int, upstream_port: int, proxy_port: int) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ctxproxy-soak-"))
        (self.dir / "policies").mkdir()
        (self.dir / "policies" / "default.yaml").write_text(POLICY)
        config = {
            "server": {"port": proxy_port, "log_level": "WARNING"},
            "store": {
                "kind": "redis",
                "url": f"redis://127.0.0.1:{redis_port}/0",
                "secret": secrets.token_hex(16),
            },
            "upstreams": [{"name": "soak", "base_url": f"http://127.0.0.1:{upstream_port}/v1"}],
            "policies_dir": str(self.dir / "policies"),
        }
        (self.dir / "config.yaml").write_bytes(orjson.dumps(config))
        self.all: list[subprocess.Popen[bytes]] = []
        self.redis = self._start(
            [
                "redis-server",
                "--port",
                str(redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ]
        )
        self.upstream = self._start(
            [sys.executable, str(HERE / "upstream.py"), "--port", str(upstream_port)]
        )
        self.proxy = self._start(
            [sys.executable, "-m", "proxy.cli", "serve", "--config", str(self.dir / "config.yaml")]
        )

    def _start(self, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.dir / f"{Path(argv[0]).name}-{len(self.all)}.log", "wb")  # noqa: SIM115
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.all.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.all):
            process.terminate()
        for process in self.all:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def sample(pid: int) -> tuple[int, int]:
    rss = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().split("\n")
        if line.startswith("VmRSS:")
    )
    return rss // 1024, len(os.listdir(f"/proc/{pid}/fd"))


async def wait_ready(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(300):
            try:
                async with session.get(f"{url}/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise TimeoutError("the proxy did not become ready")


async def one(
    session: aiohttp.ClientSession, url: str, body: bytes, expected: int
) -> tuple[bool, float, str]:
    start = time.perf_counter()
    try:
        async with session.post(
            url, data=body, headers={"Content-Type": "application/json"}
        ) as response:
            data = await response.read()
            ok = response.status == expected and (b"[DONE]" in data or not data.startswith(b"data"))
            detail = "" if ok else f"{response.status} {data[:120]!r}"
    except (aiohttp.ClientError, TimeoutError) as exc:
        ok, detail = False, type(exc).__name__
    return ok, (time.perf_counter() - start) * 1000, detail


async def load(url: str, pid: int, rate: float, seconds: float) -> dict[str, Any]:
    kinds = {k: (orjson.dumps(b), s) for k, (b, s) in bodies(1).items()}
    names = list(kinds)
    per_minute: dict[int, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    samples: list[tuple[float, int, int]] = []
    tasks: set[asyncio.Task[None]] = set()
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def fire(kind: str, at: float) -> None:
            body, expected = kinds[kind]
            ok, ms, detail = await one(session, f"{url}/v1/chat/completions", body, expected)
            counts[kind] += 1
            per_minute[int(at // 60)].append(ms)
            if not ok:
                errors[f"{kind}: {detail}"] += 1

        start = time.monotonic()
        n = 0
        while (elapsed := time.monotonic() - start) < seconds:
            if n % max(1, int(rate * 5)) == 0:
                samples.append((elapsed, *sample(pid)))
            task = asyncio.create_task(fire(names[n % len(names)], elapsed))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            n += 1
            await asyncio.sleep(max(0.0, start + n / rate - time.monotonic()))
        await asyncio.gather(*tasks)
        samples.append((time.monotonic() - start, *sample(pid)))
    return {"counts": counts, "errors": errors, "per_minute": per_minute, "samples": samples}


def report(result: dict[str, Any], rate: float, seconds: float) -> None:
    counts, errors = result["counts"], result["errors"]
    print(
        f"\nrate {rate:g}/s for {seconds:g} s: {sum(counts.values())} requests "
        f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})"
    )
    print(f"unexpected answers: {sum(errors.values())}")
    for detail, count in errors.most_common(5):
        print(f"  {count} x {detail}")
    print("\n| minute | requests | p50 ms | p99 ms |\n|---|---|---|---|")
    for minute, values in sorted(result["per_minute"].items()):
        p99 = statistics.quantiles(values, n=100)[98] if len(values) >= 100 else max(values)
        print(f"| {minute + 1} | {len(values)} | {statistics.median(values):.1f} | {p99:.1f} |")
    samples = result["samples"]
    rss = [s[1] for s in samples]
    fds = [s[2] for s in samples]
    print(
        f"\nproxy RSS MB: first {rss[0]}, after 1 min {rss[min(12, len(rss) - 1)]}, "
        f"last {rss[-1]}, max {max(rss)}"
    )
    print(f"proxy open fds: first {fds[0]}, last {fds[-1]}, max {max(fds)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1 minute instead of 10")
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    seconds = args.seconds or (60.0 if args.quick else 600.0)
    ports = free_port(), free_port(), free_port()
    procs = Procs(*ports)
    try:
        url = f"http://127.0.0.1:{ports[2]}"
        asyncio.run(wait_ready(url))
        result = asyncio.run(load(url, procs.proxy.pid, args.rate, seconds))
        report(result, args.rate, seconds)
    finally:
        procs.stop()


if __name__ == "__main__":
    main()
