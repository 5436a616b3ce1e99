"""Where the passthrough's CPU goes, against the reference forwarder's: cProfile of each server
under the same load, only while the measured requests run.

    python -m bench.overhead.profile_pass [--sizes 2KB,1MB] [--concurrency 8] [--duration 8]
        [--top 15] [--own 15] [--event-loop auto] [--keep DIR]

For each body size, the mock upstream, `ctxproxy serve` with the `inspect` policy (the
passthrough: original bytes forwarded) and bench/overhead/ref_forwarder.py each run under
bench/overhead/profiled.py; after a warm-up, each server is profiled while loadgen drives it for
`--duration` seconds. Prints, per server, the profiled CPU per request, the share of self time by
package and the top functions by self time per request (cProfile inflates Python-heavy code
several times: compare the shares and the two servers, not the microseconds with
`bench.overhead`'s).
"""

from __future__ import annotations

import argparse
import os
import pstats
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.overhead.bodies import SIZES, write_bodies
from bench.overhead.load import Load, Loader
from bench.overhead.procs import CLK_TCK, Processes, Server, free_port
from bench.overhead.servers import AUTHORIZATION, REPO, ctxproxy_config

HERE = Path(__file__).resolve().parent
PACKAGES = ("proxy", "aiohttp", "asyncio", "uvloop", "multidict", "yarl", "orjson", "tiktoken")


def _package(filename: str) -> str:
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C)"
    parts = Path(filename).parts
    for name in PACKAGES:
        if name in parts:
            return name
    return "other Python"


def _label(func: tuple[str, int, str]) -> str:
    filename, line, name = func
    if filename.startswith("~"):
        return name
    path = Path(filename)
    parts = path.parts
    for root in ("proxy", "aiohttp", "asyncio", "bench"):
        if root in parts:
            where = "/".join(parts[len(parts) - 1 - parts[::-1].index(root) :])
            return f"{where}:{line} {name}"
    return f"{path.name}:{line} {name}"


def handled(raw: dict[tuple[str, int, str], tuple[int, int, float, float, object]]) -> int:
    """Requests the profile saw: calls of aiohttp's `Application._make_request`, once per request
    (a plain function: cProfile counts every resumption of a coroutine as a call)."""
    return max(
        (v[1] for (f, _, n), v in raw.items() if n == "_make_request" and f.endswith("web_app.py")),
        default=0,
    )


def summarize(path: Path, top: int, own: int) -> list[str]:
    stats = pstats.Stats(str(path))
    raw = stats.stats  # type: ignore[attr-defined]
    requests = handled(raw)
    by_package: dict[str, float] = defaultdict(float)
    total = 0.0
    for func, (_cc, _nc, tottime, _ct, _callers) in raw.items():
        by_package[_package(func[0])] += tottime
        total += tottime
    per = 1e6 / max(1, requests)
    lines = [
        f"{requests} requests profiled, self time {total * per:.0f} us per request; by package:"
    ]
    for name, seconds in sorted(by_package.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {name:14} {seconds * per:8.0f} us  {seconds / total:6.1%}")
    ranked = sorted(raw.items(), key=lambda kv: -kv[1][2])
    mine = [kv for kv in ranked if _package(kv[0][0]) == "proxy"][:own]
    for title, rows in ((f"top {top} by self time", ranked[:top]), (f"top {own} in proxy/", mine)):
        lines.append(f"{title} (us per request: self, cumulative; calls per request):")
        for func, (_cc, calls, tottime, cumtime, _callers) in rows:
            lines.append(
                f"  {tottime * per:7.1f} {cumtime * per:8.1f} {calls / max(1, requests):6.1f}x"
                f"  {_label(func)}"
            )
    return lines


def main_thread_cpu(pid: int) -> float:
    """CPU seconds of the process's main thread (its event loop)."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def profile_one(
    server: Server, loader: Loader, url: str, body: Path, args: argparse.Namespace, out: Path
) -> list[str]:
    loader.run(Load(url, body, args.concurrency, 2.0, 0, AUTHORIZATION, False))
    server.quiesce(30)
    cpu, main = server.cpu(), main_thread_cpu(server.pid)
    os.kill(server.pid, signal.SIGUSR1)
    loader.run(Load(url, body, args.concurrency, args.duration, 0, AUTHORIZATION, False))
    os.kill(server.pid, signal.SIGUSR2)
    server.quiesce(30)
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    done = handled(pstats.Stats(str(out)).stats)  # type: ignore[attr-defined]
    per = 1e6 / max(1, done)
    cpu_us, main_us = (server.cpu() - cpu) * per, (main_thread_cpu(server.pid) - main) * per
    head = (
        f"{server.name}: {cpu_us:.0f} us CPU per request under the profiler, "
        f"{main_us:.0f} us of it on the event loop's thread (the rest: worker threads)"
    )
    return [head, *summarize(out, args.top, args.own)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="2KB,1MB")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--own", type=int, default=15, help="functions of proxy/ listed")
    parser.add_argument("--event-loop", default="auto", choices=("auto", "uvloop", "asyncio"))
    parser.add_argument("--keep", type=Path, help="copy the .prof files to this directory")
    args = parser.parse_args(argv)
    procs = Processes()
    py, profiled = sys.executable, str(HERE / "profiled.py")
    try:
        with tempfile.TemporaryDirectory(prefix="ctxproxy-profile-") as tmpdir:
            tmp = Path(tmpdir)
            sizes = args.sizes.split(",")
            bodies = write_bodies(tmp / "bodies", {k: SIZES[k] for k in sizes})
            loader = Loader(procs, None, "python", tmp)
            mock_port = free_port()
            mock = procs.add(
                Server(
                    "mock",
                    [py, str(HERE / "mock_upstream.py"), "--port", str(mock_port)],
                    mock_port,
                    log=tmp / "mock.log",
                )
            )
            mock.start(REPO)
            mock.wait_ready()
            config = ctxproxy_config(tmp / "pass.yaml", mock_port, "inspect", None, args.event_loop)
            for size in sizes:
                for name in ("reference", "ctxproxy-pass"):
                    out = tmp / f"{name}-{size}.prof"
                    port = free_port()
                    target = (
                        [
                            str(HERE / "ref_forwarder.py"),
                            "--upstream",
                            f"http://127.0.0.1:{mock_port}",
                            "--port",
                            str(port),
                        ]
                        if name == "reference"
                        else [
                            "-m",
                            "proxy.cli",
                            "serve",
                            "--config",
                            str(config),
                            "--port",
                            str(port),
                        ]
                    )
                    server = procs.add(
                        Server(
                            name,
                            [py, profiled, str(out), *target],
                            port,
                            ready_path="/healthz" if name != "reference" else "/",
                            ready_timeout=60,
                            log=tmp / f"{name}.log",
                        )
                    )
                    server.start(REPO)
                    server.wait_ready()
                    url = f"http://127.0.0.1:{port}/v1/chat/completions"
                    print(f"### {size}, c={args.concurrency}", flush=True)
                    print(
                        "\n".join(profile_one(server, loader, url, bodies[size, False], args, out)),
                        flush=True,
                    )
                    server.stop()
                    if args.keep:
                        args.keep.mkdir(parents=True, exist_ok=True)
                        shutil.copy(out, args.keep / out.name)
    finally:
        procs.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
