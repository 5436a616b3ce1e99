"""`python -m bench.agents install|run`: see `bench/agents/README.md`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.agents import install as installer
from bench.agents.proxy_proc import REPO_ROOT

CLIS = ("claude", "codex")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.agents", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("install", "run"):
        cmd = sub.add_parser(name)
        cmd.add_argument("--cli", choices=[*CLIS, "both"], default="both")
        cmd.add_argument(
            "--prefix",
            type=Path,
            default=None,
            help=f"where the CLIs are installed (default ${installer.PREFIX_ENV} or "
            "~/.cache/ctxproxy-agents)",
        )
        cmd.add_argument(
            "--claude-version",
            default=installer.DEFAULT_VERSIONS["claude"],
            help="an npm version or `latest` (default %(default)s)",
        )
        cmd.add_argument(
            "--codex-version",
            default=installer.DEFAULT_VERSIONS["codex"],
            help="an npm version or `latest` (default %(default)s)",
        )
        cmd.add_argument(
            "--versions",
            default=None,
            help="shorthand: `latest`, or `CLAUDE,CODEX` (e.g. 2.1.197,0.171.0)",
        )
    sub.choices["install"].add_argument("--force", action="store_true", help="reinstall")
    _add_run_arguments(sub.choices["run"])
    return parser


def _add_run_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--out",
        type=Path,
        default=Path("bench/agents/out"),
        help="report directory (default %(default)s)",
    )
    run.add_argument(
        "--capture-fixtures",
        type=Path,
        default=None,
        metavar="DIR",
        help="write scrubbed client bodies here (e.g. tests/fixtures/agents)",
    )
    run.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="temp homes and workspaces (default <prefix>/runs/<time>)",
    )
    run.add_argument(
        "--proxy-src",
        type=Path,
        default=REPO_ROOT,
        help="the source tree whose proxy/ is run (default: this one)",
    )
    run.add_argument(
        "--client-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set in every CLI's environment (KEY= removes it), e.g. "
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC= to let Claude Code send its side requests",
    )
    run.add_argument(
        "--exercise-search",
        action="store_true",
        help="the fake calls search_context_artifact once per turn when offered",
    )


def _versions(args: argparse.Namespace) -> dict[str, str]:
    versions = {"claude": args.claude_version, "codex": args.codex_version}
    if args.versions:
        parts = args.versions.split(",")
        versions = dict(zip(CLIS, parts * 2 if len(parts) == 1 else parts, strict=False))
    chosen = CLIS if args.cli == "both" else (args.cli,)
    return {cli: versions[cli] for cli in chosen}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    prefix = args.prefix or installer.default_prefix()
    installed = {
        cli: installer.install(prefix, cli, version, force=getattr(args, "force", False))
        for cli, version in _versions(args).items()
    }
    for inst in installed.values():
        print(f"{inst.cli} {inst.version}: {inst.binary} ({inst.reported_version()})")
    if args.command == "install":
        return 0
    from bench.agents.main_run import run_and_report

    return asyncio.run(run_and_report(installed, prefix, args))


if __name__ == "__main__":
    sys.exit(main())
