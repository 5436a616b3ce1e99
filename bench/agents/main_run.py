"""The `run` subcommand: run, write the raw observations, the report and (optionally) fixtures."""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.agents import analysis, dump, report, run
from bench.agents.install import Installed
from bench.agents.proxy_proc import REPO_ROOT


def source_revision(source: Path = REPO_ROOT) -> str:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(source), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    last = git("log", "-1", "--format=%h", "--", "proxy") or "unknown"
    dirty = "+dirty" if git("status", "--porcelain", "--", "proxy") else ""
    return f"{last}{dirty} (tree at {head})"


def _meta(data: run.RunData, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "proxy": f"proxy/ last changed in {source_revision(args.proxy_src)}",
        "proxy_module": data.proxy_module,
        "date": time.strftime("%Y-%m-%d"),
        "versions": {cli: inst.version for cli, inst in data.installed.items()},
        "exercise_search": bool(args.exercise_search),
        "client_env": list(args.client_env),
    }


async def run_and_report(
    installed: dict[str, Installed], prefix: Path, args: argparse.Namespace
) -> int:
    work_root = run.work_root_for(args.work_dir, prefix)
    client_env = dict(item.split("=", 1) for item in args.client_env)
    options = run.RunOptions(args.exercise_search, args.proxy_src, client_env)
    data = await run.run(installed, work_root, options)
    out: Path = args.out
    raw = dump.write_raw(data, out)
    rows, turns = analysis.build_rows(data), analysis.turn_rows(data)
    print(report.write(out, rows, turns, _meta(data, args)))
    print(f"report: {out / 'report.md'}, {out / 'report.json'}; raw: {raw}; work: {work_root}")
    if args.capture_fixtures is not None:
        from bench.agents import fixtures

        for path in fixtures.write(data, args.capture_fixtures):
            print(f"fixture: {path} ({path.stat().st_size} bytes)")
    return 0 if all(t.answered for t in data.turns) else 1
