"""One harness run: fake upstream, proxy, recorder, then each CLI's three turns.

Order of the pieces: CLI -> recorder -> proxy -> fake. After the CLIs are done and while the
proxy is still up, every captured client body is replayed against the proxy's dry run
(`POST /v1/context/prepare`) for its manifest; then everything stops and the report is built.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.agents import clients, dry_run
from bench.agents.fake_common import Script
from bench.agents.fake_upstream import FakeUpstream
from bench.agents.install import Installed
from bench.agents.proxy_proc import REPO_ROOT, ProxyProcess
from bench.agents.recorder import ClientRecord, Recorder

TURNS = (1, 2, 3)
INVOCATIONS = {"claude": clients.claude_invocation, "codex": clients.codex_invocation}


@dataclass
class RunData:
    """Everything a run observed."""

    installed: dict[str, Installed]
    work_root: Path
    proxy_module: str
    turns: list[clients.TurnResult] = field(default_factory=list)
    client: list[ClientRecord] = field(default_factory=list)
    upstream: list[Any] = field(default_factory=list)
    manifests: dict[int, dict[str, Any]] = field(default_factory=dict)
    access: dict[str, dict[str, Any]] = field(default_factory=dict)
    proxy_log: list[dict[str, Any]] = field(default_factory=list)
    sandboxes: dict[str, clients.Sandbox] = field(default_factory=dict)


@dataclass(frozen=True)
class RunOptions:
    exercise_search: bool = False
    proxy_source: Path = REPO_ROOT
    client_env: dict[str, str] = field(default_factory=dict)
    """Set in (or, with an empty value, removed from) every CLI's environment."""


def _with(env: dict[str, str], changes: dict[str, str]) -> dict[str, str]:
    out = dict(env)
    for key, value in changes.items():
        if value:
            out[key] = value
        else:
            out.pop(key, None)
    return out


async def _run_cli(
    cli: str,
    installed: Installed,
    script: Script,
    base_url: str,
    sandbox: clients.Sandbox,
    options: RunOptions,
) -> list[clients.TurnResult]:
    sandbox.create()
    results = []
    for turn in TURNS:
        script.cli, script.turn = cli, turn
        argv, env = INVOCATIONS[cli](sandbox, installed, base_url, turn)
        env = _with(env, options.client_env)
        print(f"[bench.agents] {cli} {installed.version} turn {turn} ...", flush=True)
        result = await clients.run_turn(argv, env, sandbox.workspace, cli, turn, script.marker())
        print(
            f"[bench.agents]   exit {result.exit_code} in {result.seconds:.1f}s, "
            f"final answer {'reached' if result.answered else 'MISSING'}",
            flush=True,
        )
        results.append(result)
    script.cli, script.turn = "", 0
    return results


def work_root_for(base: Path | None, prefix: Path) -> Path:
    root = base or prefix / "runs" / time.strftime("%Y%m%d-%H%M%S")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    return root


async def run(
    installed: dict[str, Installed],
    work_root: Path,
    options: RunOptions,
) -> RunData:
    script = Script(exercise_search=options.exercise_search)
    fake = FakeUpstream(script)
    fake_url = await fake.start()
    proxy = ProxyProcess(work_root, fake_url, options.proxy_source)
    data = RunData(installed, work_root, await proxy.module_path())
    recorder = Recorder(proxy.url, script)
    try:
        await proxy.start()
        base_url = await recorder.start()
        for cli, inst in installed.items():
            sandbox = clients.Sandbox(work_root / cli)
            data.sandboxes[cli] = sandbox
            data.turns += await _run_cli(cli, inst, script, base_url, sandbox, options)
        data.manifests = await dry_run.manifests(proxy.url, recorder.records)
    finally:
        await recorder.stop()
        await proxy.stop()
        await fake.stop()
    data.client = recorder.records
    data.upstream = fake.log.records
    data.access = proxy.access_lines()
    data.proxy_log = proxy.log_lines()
    return data
