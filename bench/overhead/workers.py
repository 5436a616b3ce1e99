"""Scale-out: ctxproxy with `--workers 1` and `--workers 2`, side by side in one run.

    python -m bench.overhead.workers [--rounds 3] [--duration 5] [--write-results]

Starts the fast mock upstream (bench/overhead/mock_upstream.py) and two ctxproxy servers in
passthrough (the `inspect` policy: the original bytes go upstream) on the Redis store, one with
`--workers 1` and one with `--workers 2`. Then, for each round and each concurrency, drives the
mock alone (`direct`: what the load generator and the mock can do on this host, the ceiling of
the comparison), then each server, with the same closed-loop load of 2 KB chat completions
(bench/overhead/loadgen.py, `--clients` processes sharing the connections). Prints the medians
over rounds, the ratio workers=2 / workers=1 and the target (at least 1.7x at c >= 16), with
`/proc/loadavg` before and after. `--write-results` replaces the "Workers" section of
bench/overhead/RESULTS.md. `python -m bench.overhead --workers` runs it after the overhead run.

With 4 CPUs or more the load generator, the mock and the servers get CPUs of their own (the
servers two: what `--workers 2` needs); with fewer nothing is pinned, and the load generator
and the mock take CPU from the servers (the ratio then understates what a second core gives).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.overhead.bodies import SIZES, write_bodies
from bench.overhead.load import Load, Loader
from bench.overhead.procs import Processes, Server, free_port, http_request, pin
from bench.overhead.report import write_section
from bench.overhead.servers import AUTHORIZATION, BIN, REPO

TARGET_RATIO = 1.7
SIZE = "2KB"
KEY_PREFIX = "ctxproxy-bench-workers:"
HEADING = "## Workers"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds per cell")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per cell")
    parser.add_argument("--concurrency", default="16,64", help="comma list, each >= 16")
    parser.add_argument("--clients", type=int, default=2, help="load generator processes")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument("--write-results", action="store_true", help="rewrite RESULTS.md's section")
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    if min(args.concurrency) < 16:
        parser.error("--concurrency: the target is about c >= 16")
    return args


def cpu_sets(no_pin: bool) -> tuple[set[int] | None, set[int] | None, set[int] | None]:
    """(load generator, mock, servers): pinned only when each can have its own."""
    cpus = sorted(os.sched_getaffinity(0))
    if no_pin or len(cpus) < 4:
        return None, None, None
    return {cpus[0]}, {cpus[1]}, set(cpus[2:4])


def _config(path: Path, mock_port: int, redis_url: str) -> Path:
    path.write_text(
        "server: {log_level: WARNING, log_format: text}\n"
        f"store: {{kind: redis, url: '{redis_url}', key_prefix: '{KEY_PREFIX}', secret: bench}}\n"
        f"upstreams: [{{name: mock, base_url: 'http://127.0.0.1:{mock_port}/v1', "
        "max_connections: 256}]\n"
        "auth: {mode: passthrough, passthrough_tenant: bench}\n"
        "tenants: [{name: bench, policy: inspect}]\n"
    )
    return path


def build(
    args: argparse.Namespace, tmp: Path, mock_cpus: set[int] | None, sut: set[int] | None
) -> dict[str, Server]:
    mock_port = free_port()
    mock = [sys.executable, str(REPO / "bench/overhead/mock_upstream.py"), "--port"]
    servers = {"direct": Server("direct", [*mock, str(mock_port)], mock_port, mock_cpus)}
    config = _config(tmp / "workers.yaml", mock_port, args.redis_url)
    ctxproxy = [str(BIN / "ctxproxy")]
    if not (BIN / "ctxproxy").exists():
        ctxproxy = [sys.executable, "-m", "proxy.cli"]
    for count in (1, 2):
        port = free_port()
        argv = [*ctxproxy, "serve", "--config", str(config), "--port", str(port)]
        name = f"workers={count}"
        servers[name] = Server(
            name,
            [*argv, "--workers", str(count)],
            port,
            sut,
            ready_path="/healthz",
            ready_timeout=90,
            log=tmp / f"workers-{count}.log",
        )
    return servers


def wait_listening(server: Server, timeout: float = 90) -> None:
    """Until the server printed `listening on` (with --workers 2: every worker serves)."""
    deadline = time.monotonic() + timeout
    assert server.log is not None
    while "listening on" not in server.log.read_text(errors="replace"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.name} did not print `listening on` in {timeout:g}s")
        time.sleep(0.2)
    pin(server.pid, server.cpus)  # the workers started after the supervisor was pinned


def workers_answering(server: Server, probes: int = 40) -> int:
    """Distinct `x-ctxproxy-worker` values over `probes` new connections (the kernel's spread)."""
    seen = set()
    for _ in range(probes):
        _, head, _ = http_request(server.port, "GET", "/healthz", timeout=30)
        seen.add(head.get("x-ctxproxy-worker", "single"))
    return len(seen)


def measure(
    loader: Loader, server: Server, body: Path, conc: int, args: argparse.Namespace
) -> dict[str, Any]:
    """One cell: `args.clients` load generator processes at once, `conc` connections in all."""
    url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
    shares = [conc // args.clients + (i < conc % args.clients) for i in range(args.clients)]
    loads = [Load(url, body, n, args.duration, args.warmup, AUTHORIZATION, False) for n in shares]
    cpu_before, started = server.cpu(), time.monotonic()
    with ThreadPoolExecutor(len(loads)) as pool:
        results = list(pool.map(loader.run, loads))
    cpu = server.cpu() - cpu_before  # warm-up included, like `completed`
    return {
        "rps": sum(r["rps"] for r in results),
        "errors": sum(r["errors"] for r in results),
        "p50_ms": statistics.median(r["p50_us"] for r in results) / 1000,
        "cpus": cpu / (time.monotonic() - started),
        "cpu_ms": cpu * 1000 / max(1, sum(r["completed"] for r in results)),
    }


def run_rounds(
    args: argparse.Namespace, servers: dict[str, Server], loader: Loader, body: Path
) -> dict[tuple[str, int], list[dict[str, Any]]]:
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for round_no in range(1, args.rounds + 1):
        for conc in args.concurrency:
            for name, server in servers.items():
                cell = measure(loader, server, body, conc, args)
                cells.setdefault((name, conc), []).append(cell)
                print(
                    f"  round {round_no} c={conc:<3} {name:10} {cell['rps']:8.1f} rps  "
                    f"p50 {cell['p50_ms']:7.2f} ms  errors {cell['errors']}  "
                    f"CPUs busy {cell['cpus']:.2f}  CPU/request {cell['cpu_ms']:.2f} ms",
                    flush=True,
                )
                server.quiesce(30)
    return cells


def _median(cells: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(c[key] for c in cells))


def render(
    args: argparse.Namespace,
    cells: dict[tuple[str, int], list[dict[str, Any]]],
    facts: dict[str, str],
    command: str,
) -> tuple[str, bool]:
    lines = [
        HEADING,
        "",
        "Throughput of ctxproxy passthrough (`inspect`, Redis store) with `--workers 1` and "
        f"`--workers 2`, side by side in one run: {SIZE} chat completions, closed loop, "
        f"{args.rounds} alternating rounds of {args.duration:g} s per cell, medians over rounds. "
        "`direct` is the load generator against the mock alone: the most this host can show. "
        "CPUs busy: CPU seconds of the server's processes per second under load (a worker "
        "can keep at most one busy); CPU ms/request: the same CPU time per answer, which the "
        "other processes on the host do not change much. "
        "Generated by `bench/overhead/workers.py`.",
        "",
        f"Command: `{command}`",
        "",
        *(f"- {k}: {v}" for k, v in facts.items()),
        "",
        "| c | server | rps (median) | rps per round | p50 ms | CPUs busy | CPU ms/request "
        "| errors |",
        "|---:|---|---:|---|---:|---:|---:|---:|",
    ]
    ratios = {}
    for conc in args.concurrency:
        for name in ("direct", "workers=1", "workers=2"):
            got = cells[name, conc]
            rounds = ", ".join(f"{c['rps']:.0f}" for c in got)
            lines.append(
                f"| {conc} | {name} | {_median(got, 'rps'):.0f} | {rounds} | "
                f"{_median(got, 'p50_ms'):.2f} | {_median(got, 'cpus'):.2f} | "
                f"{_median(got, 'cpu_ms'):.2f} | "
                f"{sum(c['errors'] for c in got)} |"
            )
        ratios[conc] = _median(cells["workers=2", conc], "rps") / max(
            1e-9, _median(cells["workers=1", conc], "rps")
        )
    met = all(r >= TARGET_RATIO for r in ratios.values())
    shown = ", ".join(f"{r:.2f}x at c={c}" for c, r in ratios.items())
    lines += [
        "",
        f"Target: with `--workers 2`, at least {TARGET_RATIO}x the single worker's throughput "
        f"at {SIZE} and c >= 16: **{'met' if met else 'missed'}** ({shown}).",
    ]
    return "\n".join(lines) + "\n", met


def machine_facts() -> dict[str, str]:
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit or "unknown",
        "host": f"{os.cpu_count()} CPUs, {cpu}",
        "loadavg before": Path("/proc/loadavg").read_text().strip(),
    }


def delete_keys(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{KEY_PREFIX}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join(["python", "-m", "bench.overhead.workers", *(argv or sys.argv[1:])])
    procs = Processes()
    try:
        with tempfile.TemporaryDirectory(prefix="ctxproxy-workers-bench-") as name:
            tmp = Path(name)
            load_cpus, mock_cpus, sut = cpu_sets(args.no_pin)
            loader = Loader(procs, load_cpus, "python", tmp)
            facts = machine_facts()
            facts["pinning"] = (
                f"load generator on CPU {load_cpus}, mock on {mock_cpus}, servers on {sut}"
                if sut
                else "none (fewer than 4 CPUs: every process shares every CPU)"
            )
            facts["load generator"] = f"bench/overhead/loadgen.py x {args.clients} processes"
            body = write_bodies(tmp / "bodies", {SIZE: SIZES[SIZE]})[SIZE, False]
            servers = build(args, tmp, mock_cpus, sut)
            for server in servers.values():
                procs.add(server)
                server.start(REPO)
            for server in servers.values():
                server.wait_ready()
                if server.name != "direct":
                    wait_listening(server)
            for name in ("workers=1", "workers=2"):
                facts[f"{name}: workers answering 40 probes"] = str(
                    workers_answering(servers[name])
                )
            cells = run_rounds(args, servers, loader, body)
            facts["loadavg after"] = Path("/proc/loadavg").read_text().strip()
            section, _ = render(args, cells, facts, command)
            print("\n" + section)
            if args.write_results:
                write_section(REPO / "bench/overhead/RESULTS.md", section, HEADING)
                print("wrote the Workers section of bench/overhead/RESULTS.md")
    except KeyboardInterrupt:
        print("interrupted; stopping every process", file=sys.stderr)
        return 130
    finally:
        procs.stop_all()
        delete_keys(args.redis_url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
