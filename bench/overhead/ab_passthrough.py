"""A/B of the passthrough path of two ctxproxy source trees, side by side on one machine.

    python -m bench.overhead.ab_passthrough --a /work/baseline --b /work/main [--rounds 5] \
        [--duration 3]
    python -m bench.overhead.ab_passthrough --a /work/baseline --b /work/baseline --quick  # A = B

Starts the mock upstream (bench/overhead/mock_upstream.py) and one `ctxproxy serve` per tree, each
run from that tree's own venv (`<tree>/<venv>/bin/ctxproxy`, else `<tree>/<venv>/bin/python -m
proxy.cli`) with the same config: passthrough auth, memory store, and a policy `ab-passthrough`
that `extends: default` (mode `window`, not `off`: every request is parsed and counted) with a
2,000,000-token window, so nothing is ever reduced and the client's bytes go upstream unchanged.
Before measuring, each server is checked: the dry run (`POST /v1/context/prepare`) says
`changed: false` for every body, and `POST /v1/chat/completions` answers 200 with the mock's
completion.

Then, after one unmeasured warm-up run per server and body, for 2 KB and 100 KB bodies at
concurrency 1 and 16, it alternates closed-loop load runs (bench/overhead/loadgen.py, or `wrk` when
installed) between A and B: `--rounds` rounds, each cell run once per server per round, A first
in odd rounds and B first in even ones (drift cancels). It prints, per cell, the median
requests/s and the median of the per-run p50 latencies of A and B, the ratios B/A, the median
CPU time the proxy process spent per answered request (user + system from /proc: far less
sensitive than rps to other load on a shared machine) and the range of the per-round paired
B/A rps ratios.

CPU layout (when `taskset` exists and there are >= 2 CPUs): both proxies on the last CPU (only
one is loaded at any time), mock upstream and load generator on the first. Loopback only.
Bounded: at most 50 rounds of at most 60 s per run, and `--max-seconds` (default 1200) stops
starting new rounds once exceeded.

Depends only on the `ctxproxy serve --config` CLI, the config / policy file formats, the HTTP
endpoints, and bench/overhead/mock_upstream.py + bench/overhead/loadgen.py of the tree this script
lives in (both run for A and B alike). Nothing in `proxy` is imported.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.overhead.ab_setup import (
    AUTHORIZATION,
    SIZES,
    Proc,
    add_records_options,
    build_body,
    cpu_layout,
    ctxproxy_argv,
    delete_redis_keys,
    describe_tree,
    free_port,
    pinned,
    records_note,
    request,
    write_config,
)

CLK_TCK = os.sysconf("SC_CLK_TCK")
HERE = Path(__file__).resolve().parent
MOCK = HERE / "mock_upstream.py"
LOADGEN = HERE / "loadgen.py"
WRK_SCRIPT = """\
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = os.getenv("AB_AUTHORIZATION")
local f = assert(io.open(os.getenv("AB_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("AB_JSON {\\"requests\\":%d,\\"duration_us\\":%d,\\"errors\\":%d,"
    .. "\\"p50_us\\":%d}\\n", summary.requests, summary.duration,
    e.connect + e.read + e.write + e.status + e.timeout, latency:percentile(50)))
end
"""


# -- load -----------------------------------------------------------------------------------------


@dataclass
class Run:
    rps: float
    p50_us: float
    errors: int
    cpu_us: float = float("nan")
    """CPU time (user + system, all threads) the proxy spent per answered request."""


@dataclass
class Cell:
    size: str
    concurrency: int
    runs: dict[str, list[Run]] = field(default_factory=lambda: {"A": [], "B": []})


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def load(
    args: argparse.Namespace, server: Proc, body: Path, concurrency: int, cpu: str | None
) -> Run:
    """One closed-loop run against `server`; also its CPU time per answered request."""
    assert server.proc is not None
    pid = server.proc.pid
    before = cpu_seconds(pid)
    run, answered = _load(args, server.port, body, concurrency, cpu)
    run.cpu_us = (cpu_seconds(pid) - before) / max(answered, 1) * 1e6
    return run


def _load(
    args: argparse.Namespace, port: int, body: Path, concurrency: int, cpu: str | None
) -> tuple[Run, int]:
    """(the run, every answer the proxy gave during it, warm-up ones included)."""
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    wrk = shutil.which("wrk") if args.loader in ("auto", "wrk") else None
    if args.loader == "wrk" and wrk is None:
        raise SystemExit("--loader wrk: wrk is not installed")
    timeout = args.warmup + args.duration + 30
    if wrk is not None:
        env = {**os.environ, "AB_BODY": str(body), "AB_AUTHORIZATION": AUTHORIZATION}
        warm_answers = 0
        if args.warmup > 0:  # wrk has no warm-up of its own: a short unmeasured run first
            warm = _wrk(wrk, url, concurrency, args.warmup, args.wrk_script, cpu, env)
            warm_answers = int(warm["requests"])
        doc = _wrk(wrk, url, concurrency, args.duration, args.wrk_script, cpu, env)
        run = Run(
            doc["requests"] / (doc["duration_us"] / 1e6), float(doc["p50_us"]), int(doc["errors"])
        )
        return run, int(doc["requests"]) + warm_answers
    proc = subprocess.run(
        pinned(
            [
                sys.executable,
                str(LOADGEN),
                url,
                str(body),
                "-c",
                str(concurrency),
                "-d",
                str(args.duration),
                "-w",
                str(args.warmup),
                "--authorization",
                AUTHORIZATION,
            ],
            cpu,
        ),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"loadgen failed: {proc.stderr[-1000:]}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    return Run(float(doc["rps"]), float(doc["p50_us"]), int(doc["errors"])), int(doc["completed"])


def _wrk(
    wrk: str,
    url: str,
    concurrency: int,
    seconds: float,
    script: Path,
    cpu: str | None,
    env: dict[str, str],
) -> dict[str, Any]:
    """One wrk run (whole seconds only: wrk's -d takes integers); its AB_JSON summary."""
    proc = subprocess.run(
        pinned(
            [
                wrk,
                "-t1",
                f"-c{concurrency}",
                f"-d{max(1, round(seconds))}s",
                "--timeout",
                "30s",
                "-s",
                str(script),
                url,
            ],
            cpu,
        ),
        capture_output=True,
        text=True,
        timeout=seconds + 40,
        check=False,
        env=env,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("AB_JSON ")), None)
    if line is None:
        raise SystemExit(f"wrk failed: {proc.stdout[-500:]} {proc.stderr[-500:]}")
    result: dict[str, Any] = json.loads(line[len("AB_JSON ") :])
    return result


def check_passthrough(name: str, port: int, bodies: dict[str, Path]) -> None:
    for size, path in bodies.items():
        raw = path.read_bytes()
        status, _, data = request(port, "POST", "/v1/context/prepare", raw)
        doc = json.loads(data) if status == 200 else {}
        if status != 200 or doc.get("changed") is not False:
            raise SystemExit(
                f"{name} {size}: dry run is not a passthrough: {status} {data[:300]!r}"
            )
        status, head, data = request(port, "POST", "/v1/chat/completions", raw)
        if status != 200 or b"chat.completion" not in data:
            raise SystemExit(f"{name} {size}: completion failed: {status} {data[:300]!r}")
        actions = head.get("x-ctxproxy-actions")
        if actions not in (None, "none"):
            raise SystemExit(f"{name} {size}: x-ctxproxy-actions: {actions}")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(cells: list[Cell]) -> str:
    head = (
        "| body | conc | A rps | B rps | B/A rps | A p50 ms | B p50 ms | B/A p50 | "
        "A cpu us/req | B cpu us/req | B/A cpu | paired B/A rps min-max | errors |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for cell in cells:
        a, b = cell.runs["A"], cell.runs["B"]
        if not a or not b:
            continue
        a_rps, b_rps = median([r.rps for r in a]), median([r.rps for r in b])
        a_p50, b_p50 = median([r.p50_us for r in a]), median([r.p50_us for r in b])
        a_cpu, b_cpu = median([r.cpu_us for r in a]), median([r.cpu_us for r in b])
        paired = [rb.rps / ra.rps for ra, rb in zip(a, b, strict=False) if ra.rps]
        errors = sum(r.errors for r in a + b)
        lines.append(
            f"| {cell.size} | {cell.concurrency} | {a_rps:.0f} | {b_rps:.0f} | "
            f"{b_rps / a_rps:.3f} | {a_p50 / 1000:.2f} | {b_p50 / 1000:.2f} | "
            f"{b_p50 / a_p50:.3f} | {a_cpu:.0f} | {b_cpu:.0f} | {b_cpu / a_cpu:.3f} | "
            f"{min(paired):.2f}-{max(paired):.2f} | {errors} |"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    load_cpu, proxy_cpu = cpu_layout(args.no_pin)
    tmp = Path(tempfile.mkdtemp(prefix="ctxproxy-ab-"))
    procs: list[Proc] = []
    cells = [Cell(size, conc) for size in args.sizes for conc in args.concurrency]
    try:
        bodies = {}
        for size in args.sizes:
            bodies[size] = tmp / f"{size}.json"
            bodies[size].write_bytes(build_body(SIZES[size]))
        args.wrk_script = tmp / "post.lua"
        args.wrk_script.write_text(WRK_SCRIPT)
        mock_port = free_port()
        mock = Proc(
            "mock",
            pinned([sys.executable, str(MOCK), "--port", str(mock_port)], load_cpu),
            mock_port,
            tmp / "mock.log",
            ready_path="/",
        )
        procs.append(mock)
        mock.start()
        mock.wait_ready()
        servers = {}
        for name, tree in (("A", args.a), ("B", args.b)):
            records = getattr(args, f"{name.lower()}_records")
            config = write_config(
                tmp / name, mock_port, args.log_level, records, args.redis, args.records_flush
            )
            port = free_port()
            argv = [
                *ctxproxy_argv(tree, args.venv),
                "serve",
                "--config",
                str(config),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ]
            servers[name] = Proc(name, pinned(argv, proxy_cpu), port, tmp / f"{name}.log")
            procs.append(servers[name])
            servers[name].start()
        for name, server in servers.items():
            server.wait_ready()
            check_passthrough(name, server.port, bodies)
        print(f"A: {describe_tree(args.a, args.venv)}{records_note(args.a_records)}")
        print(f"B: {describe_tree(args.b, args.venv)}{records_note(args.b_records)}")
        wrk = args.loader != "python" and shutil.which("wrk")
        loader = "wrk" if wrk else "bench/overhead/loadgen.py"
        print(
            f"loader {loader}; cpus: proxies {proxy_cpu or 'unpinned'}, mock + loader "
            f"{load_cpu or 'unpinned'}; {args.rounds} rounds x {args.duration:g}s "
            f"(+{args.warmup:g}s warm-up) per run; body sizes (bytes): "
            + ", ".join(f"{s} {bodies[s].stat().st_size}" for s in args.sizes),
            flush=True,
        )
        # One unmeasured run per server and body first, so that round 1 starts warm on both.
        warm = argparse.Namespace(
            **{**vars(args), "duration": min(args.duration, 1.0), "warmup": 0.0}
        )
        for size in args.sizes:
            for name in ("A", "B"):
                load(warm, servers[name], bodies[size], max(args.concurrency), load_cpu)
        for rnd in range(1, args.rounds + 1):
            if time.monotonic() - started > args.max_seconds:
                print(f"--max-seconds reached: stopping after {rnd - 1} rounds")
                break
            order = ("A", "B") if rnd % 2 else ("B", "A")
            for cell in cells:
                for name in order:
                    result = load(
                        args, servers[name], bodies[cell.size], cell.concurrency, load_cpu
                    )
                    cell.runs[name].append(result)
            if args.verbose:
                print(f"  round {rnd} done at {time.monotonic() - started:.0f}s", flush=True)
    finally:
        for proc in reversed(procs):
            proc.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        delete_redis_keys(args.redis)
    print(table(cells))
    print(
        f"({time.monotonic() - started:.0f}s; medians over rounds; p50 = each run's median "
        "latency to the complete answer; cpu = the proxy's CPU time per answered request "
        "(least sensitive to other load on the machine); paired = B/A rps of the runs of one "
        "round)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--a", type=Path, required=True, help="source tree A (with a venv)")
    parser.add_argument("--b", type=Path, required=True, help="source tree B (with a venv)")
    parser.add_argument("--venv", default=".venv", help="venv directory inside each tree")
    add_records_options(parser)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=3.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds per run")
    parser.add_argument(
        "--sizes",
        type=lambda s: s.split(","),
        default=list(SIZES),
        help="comma-separated, of " + ", ".join(SIZES),
    )
    parser.add_argument(
        "--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16]
    )
    parser.add_argument(
        "--loader",
        choices=("auto", "wrk", "python"),
        default="auto",
        help="auto: wrk when installed, else bench/overhead/loadgen.py",
    )
    parser.add_argument("--log-level", default="WARNING", help="server.log_level of both proxies")
    parser.add_argument("--no-pin", action="store_true", help="do not pin CPUs")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=1200.0,
        help="start no new round after this many seconds",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="defaults of 2 rounds, 1 s runs, 0.3 s warm-up (explicit flags win)",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    if "--quick" in (sys.argv[1:] if argv is None else argv):
        parser.set_defaults(rounds=2, duration=1.0, warmup=0.3)
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 50 or not 0 < args.duration <= 60 or not 0 <= args.warmup <= 10:
        parser.error("bounds: 1 <= rounds <= 50, 0 < duration <= 60, 0 <= warmup <= 10")
    unknown = [s for s in args.sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; known: {', '.join(SIZES)}")
    args.a, args.b = args.a.resolve(), args.b.resolve()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup on SIGTERM too
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
