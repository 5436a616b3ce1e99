"""Start-up time and memory of `ctxproxy serve`: the time until /healthz answers and the resident
set size then, median of N runs, for a config file (default: one OpenAI-compatible upstream and one
`anthropic` upstream, no litellm route). `--pythonpath DIR` measures another checkout (e.g. main,
exported with `git archive`) with the same interpreter.

    python bench/startup_rss.py --runs 5 [--config cfg.yaml] [--pythonpath /tmp/main]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CONFIG = """\
upstreams:
  - {name: openai, base_url: "http://127.0.0.1:9/v1"}
%s
routes: [{model: "claude-*", upstream: %s}]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def one_run(config: Path, pythonpath: str | None) -> tuple[float, int, bool]:
    port = free_port()
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    code = (
        "import sys; from proxy.cli import main; "
        f"sys.exit(main(['serve', '--config', {str(config)!r}, '--port', '{port}']))"
    )
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                    break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("the server exited") from None
                time.sleep(0.02)
        ready = time.perf_counter() - started
        litellm = "litellm" in Path(f"/proc/{process.pid}/maps").read_text()
        return ready, rss_kib(process.pid), litellm
    finally:
        process.terminate()
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--config")
    parser.add_argument("--pythonpath")
    parser.add_argument(
        "--litellm-route",
        action="store_true",
        help="the default config with a litellm upstream instead of anthropic",
    )
    args = parser.parse_args()
    if args.config:
        config = Path(args.config)
    else:
        extra = (
            "  - {name: claude, kind: litellm, provider: anthropic}"
            if args.litellm_route
            else '  - {name: claude, kind: anthropic, base_url: "http://127.0.0.1:9"}'
        )
        if args.pythonpath and not args.litellm_route:  # a checkout without these kinds
            extra, route = "", "openai"
        else:
            route = "claude"
        config = Path(tempfile.mkdtemp()) / "config.yaml"
        config.write_text(CONFIG % (extra, route))
    runs = [one_run(config, args.pythonpath) for _ in range(args.runs)]
    ready = statistics.median(r[0] for r in runs)
    rss = statistics.median(r[1] for r in runs)
    print(
        f"ready_s={ready:.3f} rss_mib={rss / 1024:.1f} litellm_loaded={any(r[2] for r in runs)}"
        f" runs={args.runs}"
    )


if __name__ == "__main__":
    main()
