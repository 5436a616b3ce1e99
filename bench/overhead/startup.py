"""Start-up time and RSS of `ctxproxy serve`, side by side for several trees and configs.

    python -m bench.overhead.startup --tree base=/work/ab-base --tree main=. --runs 7

Each run starts `python -m proxy.cli serve` in the tree (so that tree's `proxy` package is the one
imported) on a config of one case, times it until `/healthz` answers 200, reads the process's
VmRSS, then stops it. Cases: `openai` (one OpenAI-compatible upstream) and, where the tree knows
the kind, `litellm-route` (the same plus a `litellm` upstream routed for `claude-*`). Runs
alternate between trees and cases so that a noisy host affects all alike; medians are reported.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

OPENAI = """
upstreams:
  - name: openai
    base_url: http://127.0.0.1:9/v1
"""
LITELLM_ROUTE = (
    OPENAI
    + """
  - name: claude
    kind: litellm
    provider: anthropic
routes:
  - model: "claude-*"
    upstream: claude
"""
)
CASES = {"openai": OPENAI, "litellm-route": LITELLM_ROUTE}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_once(tree: Path, config: Path, timeout_s: float = 60.0) -> tuple[float, float]:
    """(seconds to a 200 from /healthz, RSS in MB then)."""
    port = free_port()
    command = [sys.executable, "-m", "proxy.cli", "serve", "--config", str(config)]
    started = time.monotonic()
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while time.monotonic() - started < timeout_s:
            url = f"http://127.0.0.1:{port}/healthz"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return time.monotonic() - started, rss_mb(process.pid)
            time.sleep(0.02)
        raise RuntimeError(f"{tree}: no /healthz answer within {timeout_s}s")
    finally:
        process.terminate()
        process.wait(10)


def knows_litellm(tree: Path) -> bool:
    return (tree / "proxy" / "upstream" / "litellm_adapter.py").exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in args.tree)}
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        configs = {}
        for case, text in CASES.items():
            configs[case] = Path(tmp) / f"{case}.yaml"
            configs[case].write_text(text)
        for _ in range(args.runs):
            for name, tree in trees.items():
                for case, config in configs.items():
                    if case == "litellm-route" and not knows_litellm(tree):
                        continue
                    samples.setdefault((name, case), []).append(start_once(tree, config))
    print("| tree | config | runs | start-up to /healthz p50 s | RSS p50 MB |")
    print("|---|---|---|---|---|")
    for (name, case), runs in samples.items():
        seconds = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        print(f"| {name} | {case} | {len(runs)} | {seconds:.2f} | {rss:.1f} |")


if __name__ == "__main__":
    main()
