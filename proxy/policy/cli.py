"""`ctxproxy policy ...` commands (wired into the command line by `proxy/cli.py`).

- `check(directory, out)`: load the directory the way the server does (bundled presets first, the
  directory's files over them) and print one `file: key.path: problem` line per problem, or
  `ok: N policies: a, b, ...`; before either, one `warning: file: ...` line per deprecated key.
  Exit code 0 = valid (warnings or not), 1 = problems, 2 = no such directory.
- `write_schema(path)`: write the JSON schema of policy files (`policies/schema.json`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from proxy.policy.store import PolicyLoadError, PolicyStore, export_schema

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


def check(directory: Path, out: TextIO) -> int:
    """Validate every policy file in `directory`; report on `out`; return the exit code."""
    if not directory.is_dir():
        print(f"{directory}: not a directory", file=out)
        return EXIT_USAGE
    try:
        store = PolicyStore.load(directory)
    except PolicyLoadError as exc:
        _print_warnings(exc.warnings, out)
        for line in exc.problems:
            print(line, file=out)
        return EXIT_PROBLEMS
    _print_warnings(store.warnings, out)
    names = store.names()
    print(f"ok: {len(names)} policies: {', '.join(names)}", file=out)
    return EXIT_OK


def _print_warnings(warnings: tuple[str, ...], out: TextIO) -> None:
    for line in warnings:
        print(f"warning: {line}", file=out)


def render_schema() -> str:
    """The schema file's exact text (stable: same code, same bytes)."""
    return json.dumps(export_schema(), indent=2, ensure_ascii=False) + "\n"


def write_schema(path: Path) -> None:
    """Write the policy-file JSON schema to `path` (parent directories are created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_schema(), encoding="utf-8")
