"""The `ctxproxy` command's offline subcommands: policy check, policy schema, prepare."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from pipeline_harness import agent_history

from proxy.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_policy_check_ok_and_broken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "check", str(REPO / "policies")]) == 0
    assert capsys.readouterr().out.startswith("ok:")
    (tmp_path / "bad.yaml").write_text("budget: {trgger: 1}\n")
    assert main(["policy", "check", str(tmp_path)]) == 1
    assert "bad.yaml: budget.trgger: unknown key" in capsys.readouterr().out


def test_policy_schema_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    assert main(["policy", "schema", "--out", str(out)]) == 0
    schema = json.loads(out.read_text())
    assert "budget" in schema["properties"]
    assert out.read_text() == (REPO / "policies" / "schema.json").read_text()


def test_prepare_prints_manifest_and_writes_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "tiny.yaml"
    policy.write_text("extends: default\nbudget: {context_window: 8000, reserved_output: 1000}\n")
    request = tmp_path / "request.json"
    request.write_bytes(orjson.dumps({"model": "gpt-4o", "messages": agent_history(20, 3000)}))
    out = tmp_path / "prepared.json"
    code = main(["prepare", str(request), "--policy", str(policy), "--out", str(out)])
    assert code == 0
    table = capsys.readouterr().err
    assert "policy" in table and "tiny" in table and "tokens after" in table
    assert "clear_tool_results" in table or "drop_turns" in table
    prepared = orjson.loads(out.read_bytes())
    assert any(str(m.get("content")).startswith("[ctxproxy") for m in prepared["messages"])


def test_prepare_refusal_exits_1_with_envelope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "tiny.yaml"
    policy.write_text("budget: {context_window: 500, reserved_output: 100}\n")
    request = tmp_path / "request.json"
    request.write_bytes(
        orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "x " * 2000}]})
    )
    assert main(["prepare", str(request), "--policy", str(policy)]) == 1
    err = capsys.readouterr().err
    assert '"code":"context_length_exceeded"' in err


def test_prepare_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prepare", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err
