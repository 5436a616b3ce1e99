"""Install Claude Code and Codex from npm into a prefix outside the repository.

Each CLI version gets a directory of its own, `<prefix>/<cli>-<version>/`, so versions can be
mixed (`latest` is resolved to a number with `npm view` first). Both packages ship native
binaries in platform packages (optional dependencies): Claude Code's postinstall hard-links its
binary over `bin/claude.exe`, Codex's `bin/codex.js` finds `vendor/<triple>/bin/codex`. When npm
skipped the postinstall or the optional package, this module does that step itself, then checks
that `--version` prints the expected version.
"""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}
DEFAULT_VERSIONS = {"claude": "2.1.197", "codex": "0.171.0"}
PREFIX_ENV = "CTXPROXY_AGENTS_PREFIX"
STUB_MAX_BYTES = 1024 * 1024


def default_prefix() -> Path:
    return Path(os.environ.get(PREFIX_ENV) or Path.home() / ".cache" / "ctxproxy-agents")


def _npm(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["npm", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=900
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def resolve_version(cli: str, version: str) -> str:
    """A concrete version: `latest` (or any dist-tag) asked of the registry."""
    if version[:1].isdigit():
        return version
    return _npm("view", f"{PACKAGES[cli]}@{version}", "version").strip().splitlines()[-1]


@dataclass(frozen=True)
class Installed:
    cli: str
    version: str
    directory: Path

    @property
    def binary(self) -> Path:
        return self.directory / "node_modules" / ".bin" / self.cli

    def reported_version(self) -> str:
        done = subprocess.run(
            [str(self.binary), "--version"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env={**os.environ, "HOME": str(self.directory)},
        )
        return (done.stdout or done.stderr).strip()

    def works(self) -> bool:
        return self.binary.exists() and self.version in self.reported_version()


def _platform_key() -> str:
    machine = platform.machine().lower()
    cpu = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}[machine]
    return f"{platform.system().lower()}-{cpu}"


def _ensure_claude_native(installed: Installed) -> None:
    package = installed.directory / "node_modules" / "@anthropic-ai" / "claude-code"
    exe = package / "bin" / "claude.exe"
    if exe.exists() and exe.stat().st_size > STUB_MAX_BYTES:
        return
    subprocess.run(["node", "install.cjs"], cwd=package, check=False, timeout=600)


def _ensure_codex_native(installed: Installed) -> None:
    key = _platform_key()
    platform_package = installed.directory / "node_modules" / "@openai" / f"codex-{key}"
    if platform_package.exists():
        return
    alias = f"@openai/codex-{key}@npm:@openai/codex@{installed.version}-{key}"
    _npm("install", "--prefix", str(installed.directory), "--no-audit", "--no-fund", alias)


def install(prefix: Path, cli: str, version: str, *, force: bool = False) -> Installed:
    concrete = resolve_version(cli, version)
    installed = Installed(cli, concrete, prefix / f"{cli}-{concrete}")
    if installed.works() and not force:
        return installed
    installed.directory.mkdir(parents=True, exist_ok=True)
    spec = f"{PACKAGES[cli]}@{concrete}"
    _npm("install", "--prefix", str(installed.directory), "--no-audit", "--no-fund", spec)
    (_ensure_claude_native if cli == "claude" else _ensure_codex_native)(installed)
    if not installed.works():
        raise RuntimeError(
            f"{cli} {concrete} installed in {installed.directory} but `--version` says "
            f"{installed.reported_version()!r}"
        )
    return installed


def find(prefix: Path, cli: str, version: str) -> Installed:
    """The installed CLI, installing it first when it is missing."""
    return install(prefix, cli, version)
