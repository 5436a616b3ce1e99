"""A/B of the passthrough path of two ctxproxy source trees in CPU instructions per request.

    python -m bench.overhead.ab_instructions --a /work/baseline --b /work/main \
        [--sizes 2KB,100KB] [--requests 300]

CPU time per request (`ab_passthrough`) moves by several percent from one run to the next on a
shared machine; the number of instructions a process executes for the same requests does not.
Each tree's `ctxproxy serve` (same config as `ab_passthrough`: passthrough auth, memory store, a
2,000,000-token window, nothing reduced) runs under `valgrind --tool=callgrind` with
instrumentation off; after 100 unmeasured requests per body, `callgrind_control -i on`, then
`--requests` sequential `POST /v1/chat/completions` per body, then off. The printed figure is
instructions per request (Ir) and the ratio B/A per body size. Both servers run at once (valgrind
is slow: ~1 minute per tree at the defaults). Needs valgrind (`callgrind_control` comes with it).
Nothing in `proxy` is imported.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.overhead.ab_setup import (
    AUTHORIZATION,
    SIZES,
    Proc,
    add_records_options,
    build_body,
    ctxproxy_argv,
    delete_redis_keys,
    describe_tree,
    free_port,
    records_note,
    write_config,
)

MOCK = Path(__file__).with_name("mock_upstream.py")
WARM_REQUESTS = 100
READY_TIMEOUT_S = 600.0  # start-up under valgrind takes a minute or more


def _post(conn: http.client.HTTPConnection, body: bytes, count: int) -> None:
    for _ in range(count):
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=body,
            headers={"Content-Type": "application/json", "Authorization": AUTHORIZATION},
        )
        answer = conn.getresponse()
        answer.read()
        if answer.status != 200:
            raise SystemExit(f"answer {answer.status}: the passthrough is not set up")


def _total_instructions(out: Path) -> int:
    """The largest `totals:`/`summary:` figure of callgrind's output files for one process."""
    total = 0
    for part in out.parent.glob(out.name + "*"):
        for line in part.read_text(errors="replace").splitlines():
            if line.startswith(("totals:", "summary:")):
                total = max(total, int(line.split()[1]))
    return total


def _post_from(port: int, body: bytes, count: int, concurrency: int) -> None:
    """`count` posts of `body`, from `concurrency` clients at once (each its own connection)."""
    shares = [count // concurrency + (i < count % concurrency) for i in range(concurrency)]

    def client(share: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            _post(conn, body, share)
        finally:
            conn.close()

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        for done in [pool.submit(client, share) for share in shares]:
            done.result()


def measure(
    tree: Path, venv: str, config: Path, body: bytes, requests: int, work: Path,
    concurrency: int = 1,
) -> int:  # fmt: skip
    """Instructions per request of `tree`'s server for `requests` posts of `body`
    (`concurrency` at a time)."""
    out = work / f"callgrind.{free_port()}.out"
    port = free_port()
    argv = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
        *ctxproxy_argv(tree, venv), "serve", "--config", str(config),
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    server = Proc(tree.name, argv, port, out.with_suffix(".log"))
    server.start()
    try:
        server.wait_ready(READY_TIMEOUT_S)
        assert server.proc is not None
        _post_from(port, body, WARM_REQUESTS, concurrency)
        pid = str(server.proc.pid)
        subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
        _post_from(port, body, requests, concurrency)
        subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
    finally:
        server.stop()
    return _total_instructions(out) // requests


def run(args: argparse.Namespace) -> int:
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        raise SystemExit("valgrind (with callgrind_control) is not installed")
    work = Path(tempfile.mkdtemp(prefix="ctxproxy-ab-ir-"))
    mock_port = free_port()
    mock = Proc("mock", [sys.executable, str(MOCK), "--port", str(mock_port)], mock_port,
                work / "mock.log", ready_path="/")  # fmt: skip
    mock.start()
    try:
        mock.wait_ready()
        configs = [
            write_config(
                work / side,
                mock_port,
                "WARNING",
                getattr(args, f"{side}_records"),
                args.redis,
                args.records_flush,
            )
            for side in ("a", "b")
        ]
        print(f"A: {describe_tree(args.a, args.venv)}{records_note(args.a_records)}")
        print(f"B: {describe_tree(args.b, args.venv)}{records_note(args.b_records)}")
        print(f"{'body':>6} {'A Ir/req':>11} {'B Ir/req':>11} {'B/A':>7}")
        for size in args.sizes:
            body = build_body(SIZES[size])
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                jobs = [
                    pool.submit(
                        measure,
                        tree,
                        args.venv,
                        config,
                        body,
                        args.requests,
                        work,
                        args.concurrency,
                    )
                    for tree, config in zip((args.a, args.b), configs, strict=True)
                ]
                a, b = (job.result() for job in jobs)
            print(f"{size:>6} {a:>11,} {b:>11,} {b / a:>7.3f}", flush=True)
    finally:
        mock.stop()
        shutil.rmtree(work, ignore_errors=True)
        delete_redis_keys(args.redis)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=Path, required=True, help="baseline source tree")
    parser.add_argument("--b", type=Path, required=True, help="candidate source tree")
    parser.add_argument("--venv", default=".venv", help="each tree's venv, relative to it")
    add_records_options(parser)
    parser.add_argument("--sizes", default="2KB,100KB", type=lambda s: s.split(","))
    parser.add_argument("--requests", type=int, default=300, help="measured requests per body")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="requests in flight at once (default 1)"
    )
    args = parser.parse_args(argv)
    unknown = [s for s in args.sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; known: {', '.join(SIZES)}")
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
