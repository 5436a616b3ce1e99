"""The CLI invocations: three non-interactive turns each, in a throw-away home and workspace.

Claude Code: `claude -p PROMPT`, then `claude -p --continue PROMPT` twice, with
`ANTHROPIC_BASE_URL` on the recorder (no /v1), a fake `ANTHROPIC_API_KEY`, `HOME` the temp home,
`--dangerously-skip-permissions` (`IS_SANDBOX=1` lets it run as root) and the non-essential
traffic switched off. Codex: `codex exec PROMPT`, then `codex exec resume --last PROMPT` twice,
`CODEX_HOME` holding the README's config.toml (provider `ctxproxy` on `<recorder>/v1`, wire
`responses`, `env_key`) and `--dangerously-bypass-approvals-and-sandbox --skip-git-repo-check`.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

from bench.agents.install import Installed

PROMPTS = {
    1: "Run `seq 1 6000` in this workspace and tell me what the last line is.",
    2: "Now list the workspace and show me bench-data.log; how many lines does it have?",
    3: "Last one: print the numbers 1 to 4000 prefixed with 'row ' and tell me the final row.",
}
FAKE_ANTHROPIC_KEY = "sk-ant-bench-0000000000000000000000000000"
FAKE_OPENAI_KEY = "sk-bench-0000000000000000000000000000"
CODEX_CONFIG = """\
model_provider = "ctxproxy"

[model_providers.ctxproxy]
name = "ctxproxy"
base_url = "{base_url}/v1"
env_key = "OPENAI_API_KEY"   # passed through upstream (auth: passthrough), or a proxy key
wire_api = "responses"
"""
TURN_TIMEOUT_S = 300
FIXED_MTIME = 1767225600  # 2026-01-01T00:00:00Z


@dataclass
class TurnResult:
    cli: str
    turn: int
    argv: list[str]
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    expected: str

    @property
    def answered(self) -> bool:
        return self.exit_code == 0 and self.expected in self.stdout


@dataclass(frozen=True)
class Sandbox:
    """The temp home and workspace of one CLI's session."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def create(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)
        lines = (
            f"2025-01-01T00:00:{i % 60:02d}Z worker-{i % 7} processed batch {i} ok"
            for i in range(1, 451)
        )
        (self.workspace / "bench-data.log").write_text("\n".join(lines) + "\n")
        (self.workspace / "README.md").write_text("# bench workspace\n")
        for path in (*self.workspace.iterdir(), self.workspace, self.root):
            os.utime(path, (FIXED_MTIME, FIXED_MTIME))  # `ls -la` prints the same every run


def _base_env(sandbox: Sandbox, installed: Installed) -> dict[str, str]:
    path = os.pathsep.join([str(installed.binary.parent), os.environ.get("PATH", "")])
    return {
        "PATH": path,
        "HOME": str(sandbox.home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": str(sandbox.root / "tmp"),
        "NO_COLOR": "1",
    }


def claude_invocation(
    sandbox: Sandbox,
    installed: Installed,
    base_url: str,
    turn: int,
) -> tuple[list[str], dict[str, str]]:
    env = _base_env(sandbox, installed) | {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": FAKE_ANTHROPIC_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "IS_SANDBOX": "1",
    }
    argv = [str(installed.binary), "-p"]
    if turn > 1:
        argv.append("--continue")
    argv += [PROMPTS[turn], "--dangerously-skip-permissions", "--output-format", "text"]
    return argv, env


def codex_invocation(
    sandbox: Sandbox,
    installed: Installed,
    base_url: str,
    turn: int,
) -> tuple[list[str], dict[str, str]]:
    codex_home = sandbox.home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(CODEX_CONFIG.format(base_url=base_url))
    env = _base_env(sandbox, installed) | {
        "CODEX_HOME": str(codex_home),
        "OPENAI_API_KEY": FAKE_OPENAI_KEY,
    }
    argv = [str(installed.binary), "exec"]
    if turn > 1:
        argv += ["resume", "--last"]
    argv += ["--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"]
    if turn == 1:  # `exec resume` has no --color
        argv += ["--color", "never"]
    argv.append(PROMPTS[turn])
    return argv, env


async def run_turn(
    argv: list[str], env: dict[str, str], cwd: Path, cli: str, turn: int, expected: str
) -> TurnResult:
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TURN_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
    return TurnResult(
        cli,
        turn,
        argv,
        proc.returncode,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
        time.monotonic() - started,
        expected,
    )
