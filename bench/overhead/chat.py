"""Overhead benchmark: ctxproxy vs a direct call, a minimal aiohttp forwarder and LiteLLM's proxy.

One command (about 9 minutes; `--quick` about 2):

    /work/venv/bin/python -m bench.overhead [--quick] [--write-results]

Starts, side by side and in separate processes: the fast mock upstream
(bench/overhead/mock_upstream.py), the reference forwarder (bench/overhead/ref_forwarder.py),
ctxproxy with the `inspect` policy (passthrough: original bytes go upstream), ctxproxy with
bench/overhead/policies/overhead-offload.yaml (offloads and drops turns on every request) and
LiteLLM's proxy (bench/overhead/litellm_config.yaml), all pointing at the same mock. Then, for each
body size and concurrency, drives every configuration in turn with the same closed-loop load (wrk,
or bench/overhead/loadgen.py for streaming / when wrk is absent) from another process, pinned to
another CPU. Prints the tables and the targets; `--write-results` replaces the "Overhead" section
of bench/overhead/RESULTS.md. Every process started is stopped at the end, also on Ctrl-C and on
errors.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.overhead.bodies import SIZES, write_bodies
from bench.overhead.cpu_targets import cpu_rows, rest_rows
from bench.overhead.load import Load, Loader
from bench.overhead.procs import Processes, RssSampler, Server, pin
from bench.overhead.report import (
    BUFFERED_BYTES,
    CONFIGS,
    Cell,
    Results,
    memory_summary,
    rss_table,
    targets,
    targets_table,
    write_section,
)
from bench.overhead.servers import (
    AUTHORIZATION,
    REPO,
    build_servers,
    cpu_layout,
    reset_hwm,
    validate,
)
from proxy.http.event_loop import chosen_loop

PROXIES = ("reference", "ctxproxy-pass", "ctxproxy-pass-asyncio", "ctxproxy-offload", "litellm")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="~2 minutes: fewer, shorter cells")
    parser.add_argument("--duration", type=float, help="measured seconds per cell (default 5; 2)")
    parser.add_argument("--concurrency", help="comma list (default 1,16,64,256; quick 1,64)")
    parser.add_argument("--sizes", help="comma list of 2KB,100KB,1MB (default all; quick 2KB,1MB)")
    parser.add_argument("--stream-sizes", help="sizes for SSE cells (default 2KB)")
    parser.add_argument("--configs", help=f"comma list of {','.join(CONFIGS)} (default all)")
    parser.add_argument("--loader", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument("--chunks", type=int, default=16, help="SSE chunks per mock answer")
    parser.add_argument("--interval-ms", type=float, default=1.0, help="gap between SSE chunks")
    parser.add_argument(
        "--max-drain",
        type=float,
        default=45.0,
        help="max seconds to wait for a server to go idle after a cell",
    )
    parser.add_argument(
        "--write-results",
        action="store_true",
        help="replace the Overhead section of bench/overhead/RESULTS.md",
    )
    parser.add_argument("--json", type=Path, help="also write every raw cell result here")
    parser.add_argument(
        "--workers",
        action="store_true",
        help="then compare ctxproxy --workers 1 and 2 (bench.overhead.workers)",
    )
    args = parser.parse_args(argv)
    args.duration = args.duration or (2.0 if args.quick else 5.0)
    args.warmup = 1.0 if args.quick else 2.0
    args.concurrency = [
        int(x) for x in (args.concurrency or ("1,64" if args.quick else "1,16,64,256")).split(",")
    ]
    args.sizes = (args.sizes or ("2KB,1MB" if args.quick else "2KB,100KB,1MB")).split(",")
    args.stream_sizes = (args.stream_sizes or "2KB").split(",")
    args.configs = (args.configs or ",".join(CONFIGS)).split(",")
    for name in args.sizes + args.stream_sizes:
        if name not in SIZES:
            parser.error(f"unknown size {name!r}; known: {', '.join(SIZES)}")
    for name in args.configs:
        if name not in CONFIGS:
            parser.error(f"unknown configuration {name!r}; known: {', '.join(CONFIGS)}")
    if "direct" not in args.configs:
        args.configs.insert(0, "direct")
    return args


def machine_facts(loader: str) -> dict[str, str]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    versions = {}
    for dist in ("aiohttp", "litellm", "ctxproxy"):
        try:
            from importlib.metadata import version

            versions[dist] = version(dist)
        except Exception:
            versions[dist] = "absent"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "loader": loader,
        "loadavg_at_start": Path("/proc/loadavg").read_text().strip(),
        "event loops": f"ctxproxy-pass {chosen_loop('auto')}, ctxproxy-pass-asyncio asyncio, "
        "reference asyncio",
    }


def run_cells(
    args: argparse.Namespace,
    servers: dict[str, Server],
    loader: Loader,
    bodies: dict[tuple[str, bool], Path],
    sampler: RssSampler,
    rest_kb: dict[str, int],
) -> tuple[list[Cell], dict[str, dict[str, Any]]]:
    cells: list[Cell] = []
    memory: dict[str, dict[str, Any]] = {
        name: {"rest_kb": rest_kb[name], "start_kb": servers[name].rss_kb(), "hwm_kb": {}}
        for name in servers
        if name in PROXIES
    }
    mock, sut_cpus = (
        servers["direct"],
        next((s.cpus for s in servers.values() if s.name != "direct"), None),
    )
    plan = [
        (m, s, c)
        for m, sizes in (("json", args.sizes), ("sse", args.stream_sizes))
        for s in sizes
        for c in args.concurrency
    ]
    # Cells that buffer more than BUFFERED_BYTES of request bodies run last, so that the memory
    # they leave behind (freed but kept by the allocator) does not show in the others.
    unbuffered = [p for p in plan if p[2] * SIZES[p[1]] <= BUFFERED_BYTES]
    warmed: set[tuple[str, str]] = set()
    for name in memory:
        reset_hwm(servers[name])
    for part, cells_of_part in (
        ("unbuffered cells", unbuffered),
        ("all cells", [p for p in plan if p not in unbuffered]),
    ):
        for mode, size, conc in cells_of_part:
            for name, server in servers.items():
                if name == "direct":  # the mock is the server under test: give it that CPU
                    pin(mock.pid, sut_cpus)
                cells.append(
                    run_cell(
                        args,
                        server,
                        loader,
                        bodies,
                        sampler,
                        mode,
                        size,
                        conc,
                        warm=(mode, size) not in warmed,
                    )
                )
                if name == "direct":
                    pin(mock.pid, mock.cpus)
            warmed.add((mode, size))
        for name in memory:
            memory[name]["hwm_kb"][part] = servers[name].hwm_kb()
    sampler.phase = "end"
    return cells, memory


def run_cell(
    args: argparse.Namespace,
    server: Server,
    loader: Loader,
    bodies: dict[tuple[str, bool], Path],
    sampler: RssSampler,
    mode: str,
    size: str,
    conc: int,
    *,
    warm: bool,
) -> Cell:
    url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
    stream = mode == "sse"
    body = bodies[size, stream]
    sampler.phase = "warmup"
    if warm:  # unmeasured warm-up of this server on this body
        loader.run(Load(url, body, 16, args.warmup, 0, AUTHORIZATION, stream))
        server.quiesce(args.max_drain)
    python_warmup = 0.3 if loader.name(stream) == "python" else 0
    cpu_before = server.cpu()
    sampler.phase = f"{mode}|{size}|{conc}|{server.name}"
    result = loader.run(Load(url, body, conc, args.duration, python_warmup, AUTHORIZATION, stream))
    sampler.phase = "drain"
    drained = server.quiesce(args.max_drain)
    result["drain_s"] = round(drained, 2)
    result["cpu_us_per_request"] = (
        (server.cpu() - cpu_before) * 1e6 / max(1, result.get("completed") or result["requests"])
    )
    key = "ttfb_p50_us" if stream else "p50_us"
    print(
        f"  {mode} {size:6} c={conc:<3} {server.name:16} {result['rps']:9.1f} rps  "
        f"p50 {result[key] / 1000:8.2f} ms  p99 {result[key.replace('50', '99')] / 1000:8.2f} "
        f"ms  errors {result['errors']}  cpu/req {result['cpu_us_per_request']:7.0f} us  "
        f"drain {drained:.1f}s",
        flush=True,
    )
    return Cell(mode, size, conc, server.name, result)


def render(
    args: argparse.Namespace,
    facts: dict[str, str],
    res: Results,
    memory: dict[str, dict[str, Any]],
    notes: list[str],
    elapsed: float,
    command: str,
) -> str:
    goals = targets(res, memory, args.sizes) + rest_rows(memory) + cpu_rows(res)
    out = [
        "## Overhead",
        "",
        "Added latency and throughput of ctxproxy against a direct call, a minimal aiohttp "
        "forwarder (the floor of this stack) and LiteLLM's proxy, measured in one run on "
        "the same mock upstream and load. Generated by `bench/overhead/chat.py`.",
        "",
        f"Command: `{command}` ({elapsed / 60:.1f} min)",
        "",
    ]
    out += [f"- {k}: {v}" for k, v in facts.items()]
    out += ["", "Configurations:", ""] + [
        f"- `{k}`: {v}" for k, v in CONFIGS.items() if k in args.configs
    ]
    out += [
        "",
        f"Cells: {args.duration:g} s measured per cell, closed loop, bodies "
        f"{', '.join(args.sizes)} (agent conversations with big tool results, "
        "bench/overhead/bodies.py), concurrency "
        f"{', '.join(map(str, args.concurrency))}. `+p50/+p99` = that percentile minus the "
        "same percentile going direct. `*` = the cell had errors. Ratios: "
        "`pass/ref +p50` = ctxproxy-pass added p50 / reference added p50; "
        "`pass/litellm rps` = ctxproxy-pass rps / LiteLLM rps, `-` where LiteLLM completed "
        "fewer requests than the concurrency within the cell (all of them still queued: "
        "its rate is then not measured; see the CPU table).",
        "",
        "### Targets",
        "",
        targets_table(goals),
        "",
        "### Non-streaming (latency to the complete answer)",
        "",
        res.table("json"),
        "",
        f"### Streaming ({args.chunks} chunks, {args.interval_ms:g} ms apart; time to first byte)",
        "",
        res.table("sse"),
        "",
        "### CPU time of the server per request (us; includes finishing abandoned "
        "requests after the cell)",
        "",
        res.cpu_table(),
        "",
        "### Memory (process tree of each server)",
        "",
        rss_table(memory),
        "",
        "RSS is sampled every 0.25 s (VmRSS of the process tree); VmHWM is reset (clear_refs) "
        "after start-up. Unbuffered cells: concurrency x body size <= 16 MB; they run first. "
        "The others (e.g. 1 MB bodies at c=256) hold hundreds of MB of request bodies in any "
        "server: compare with `reference`. Flat: in every unbuffered cell, RSS at the end of "
        "the cell is within max(8 MB, 5% of the start RSS) of RSS one second into it.",
        "",
        "### Checks done before measuring",
        "",
    ]
    out += [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join(["python", "-m", "bench.overhead", *(argv or sys.argv[1:])])
    started = time.monotonic()
    procs = Processes()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # also when started with SIGINT
        signal.signal(sig, _interrupt)  # ignored (a background job): always clean up
    sampler: RssSampler | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="ctxproxy-overhead-") as tmpdir:
            tmp = Path(tmpdir)
            load_cpus, mock_cpus, sut_cpus = cpu_layout(args.no_pin)
            loader = Loader(procs, load_cpus, args.loader, tmp)
            facts = machine_facts(
                "wrk (non-streaming) + bench/overhead/loadgen.py (streaming)"
                if loader.wrk
                else "bench/overhead/loadgen.py"
            )
            facts["pinning"] = (
                f"load generator on CPU {load_cpus}, mock on {mock_cpus}, "
                f"server under test on {sut_cpus}"
                if sut_cpus
                else "none"
            )
            print("\n".join(f"{k}: {v}" for k, v in facts.items()), flush=True)
            sizes = {k: SIZES[k] for k in dict.fromkeys(args.sizes + args.stream_sizes)}
            bodies = write_bodies(tmp / "bodies", sizes)
            facts["body bytes"] = ", ".join(
                f"{k} = {bodies[k, False].stat().st_size}" for k in sizes
            )
            servers = build_servers(args, tmp, procs, mock_cpus, sut_cpus)
            for server in servers.values():
                server.start(REPO)
            for server in servers.values():
                server.wait_ready()
            print(f"all servers ready after {time.monotonic() - started:.0f}s", flush=True)
            time.sleep(1.0)  # what start-up left behind settles (threads, freed memory)
            rest_kb = {name: servers[name].rss_kb() for name in servers if name in PROXIES}
            notes = validate(servers, bodies, list(sizes))
            sampler = RssSampler([s for n, s in servers.items() if n in PROXIES])
            sampler.start()
            cells, memory = run_cells(args, servers, loader, bodies, sampler, rest_kb)
            sampler.stop()
            facts["loadavg_at_end"] = Path("/proc/loadavg").read_text().strip()
            memory_summary(memory, sampler.samples, {k: SIZES[k] for k in sizes})
            res = Results(cells)
            section = render(args, facts, res, memory, notes, time.monotonic() - started, command)
            print("\n" + section)
            if args.json:
                args.json.write_text(
                    json.dumps(
                        {
                            "facts": facts,
                            "cells": [c.__dict__ for c in cells],
                            "memory": memory,
                            "rss_samples": sampler.samples,
                        },
                        indent=1,
                    )
                )
            if args.write_results:
                write_section(REPO / "bench/overhead/RESULTS.md", section)
                print(f"wrote the Overhead section of {REPO / 'bench/overhead/RESULTS.md'}")
    except KeyboardInterrupt:
        print("interrupted; stopping every process", file=sys.stderr)
        return 130
    finally:
        if sampler is not None:
            sampler.stop()
        procs.stop_all()
    if args.workers:
        from bench.overhead.workers import main as compare_workers

        return compare_workers(["--write-results"] if args.write_results else [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
