"""`policy check` and `policy schema` (the functions behind the command line)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from proxy.policy.cli import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, check, write_schema
from proxy.policy.schema import export_schema

REPO = Path(__file__).resolve().parents[2]


def test_check_ok_counts_policies_including_bundled_presets(tmp_path: Path) -> None:
    (tmp_path / "acme.yaml").write_text("extends: default\nmode: reject\n")
    out = io.StringIO()
    assert check(tmp_path, out) == EXIT_OK
    (line,) = out.getvalue().splitlines()
    assert line.startswith("ok: 8 policies: ")
    assert "acme" in line.split(": ", 2)[2].split(", ")


def test_check_the_shipped_presets() -> None:
    out = io.StringIO()
    assert check(REPO / "policies", out) == EXIT_OK
    assert out.getvalue() == (
        "ok: 7 policies: coding-agent, compact, default, example-acme, inspect, research-agent, "
        "strict\n"
    )


def test_check_prints_one_line_per_problem(tmp_path: Path) -> None:
    (tmp_path / "acme.yaml").write_text("extends: default\nbudget:\n  trgger: 0.5\n  target: 0\n")
    (tmp_path / "beta.yaml").write_text("extends: beta\n")
    out = io.StringIO()
    assert check(tmp_path, out) == EXIT_PROBLEMS
    assert out.getvalue().splitlines() == [
        "acme.yaml: budget.target: Input should be greater than 0",
        "acme.yaml: budget.trgger: unknown key (did you mean 'trigger'?)",
        "beta.yaml: extends: cycle beta -> beta",
    ]


def test_check_a_missing_directory(tmp_path: Path) -> None:
    out = io.StringIO()
    assert check(tmp_path / "nope", out) == EXIT_USAGE
    assert out.getvalue() == f"{tmp_path / 'nope'}: no such policy file or directory\n"


def test_check_one_file_with_its_extends_chain_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("server: {port: 1}\n")  # not a policy: never read
    (tmp_path / "base.yaml").write_text("extends: default\nmode: reject\n")
    (tmp_path / "child.yaml").write_text("extends: base\n")
    (tmp_path / "loop.yaml").write_text("extends: loop\n")
    out = io.StringIO()
    assert check(tmp_path / "child.yaml", out) == EXIT_OK
    (line,) = out.getvalue().splitlines()
    names = line.split(": ", 2)[2].split(", ")
    assert "child" in names and "base" in names and "config" not in names and "loop" not in names
    out = io.StringIO()
    assert check(tmp_path / "loop.yaml", out) == EXIT_PROBLEMS
    assert out.getvalue() == "loop.yaml: extends: cycle loop -> loop\n"


def test_write_schema(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "schema.json"
    write_schema(target)
    text = target.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert json.loads(text) == export_schema()
    write_schema(target)
    assert target.read_text(encoding="utf-8") == text  # deterministic
