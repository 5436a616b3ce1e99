"""`ctxproxy policy ...` commands (wired into the command line by `proxy/cli.py`).

- `check(path, out)`: load a directory the way the server does (bundled presets first, the
  directory's files over them), or one policy file (with the files next to it that it extends),
  and print one `file: key.path: problem` line per problem, or `ok: N policies: a, b, ...`;
  before either, one `warning: file: ...` line per deprecated key. Exit code 0 = valid (warnings
  or not), 1 = problems, 2 = no such file or directory.
- `write_schema(path)`: write the JSON schema of policy files (`policies/schema.json`);
  `render_schema()` is its text (the command prints it when no `--out` is given).
- `policy_file_directory(path)`: a temporary directory holding just one policy file and its
  `extends` chain, so one file is used without its unrelated neighbours (e.g. `config.yaml`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from proxy.policy.files import read_policy_file
from proxy.policy.schema import export_schema
from proxy.policy.store import (
    POLICY_SUFFIXES,
    PolicyLoadError,
    PolicyStore,
)

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


def check(path: Path, out: TextIO) -> int:
    """Validate a policy directory or one policy file; report on `out`; return the exit code."""
    if not (path.is_dir() or path.is_file()):
        print(f"{path}: no such policy file or directory", file=out)
        return EXIT_USAGE
    try:
        if path.is_dir():
            store = PolicyStore.load(path)
        else:
            with policy_file_directory(path) as directory:
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


@contextmanager
def policy_file_directory(path: Path) -> Iterator[Path]:
    """A temporary directory with a copy of `path` and of the files beside it that it extends
    (directly or through its parents); removed on exit."""
    with tempfile.TemporaryDirectory(prefix="ctxproxy-policy-") as temporary:
        directory = Path(temporary)
        for source in _extends_chain(path):
            shutil.copyfile(source, directory / source.name)
        yield directory


def _extends_chain(path: Path) -> list[Path]:
    """`path`, then each sibling file its `extends` names, while there is one (no repeats)."""
    chain = [path]
    while True:
        data, _ = read_policy_file(chain[-1])
        parent = data.get("extends") if data else None
        if not isinstance(parent, str):
            return chain
        siblings = (path.parent / f"{parent}{suffix}" for suffix in POLICY_SUFFIXES)
        found = next((p for p in siblings if p.is_file() and p not in chain), None)
        if found is None:  # a bundled parent, or an unknown one the load will report
            return chain
        chain.append(found)


def render_schema() -> str:
    """The schema file's exact text (stable: same code, same bytes)."""
    return json.dumps(export_schema(), indent=2, ensure_ascii=False) + "\n"


def write_schema(path: Path) -> None:
    """Write the policy-file JSON schema to `path` (parent directories are created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_schema(), encoding="utf-8")
