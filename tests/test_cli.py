"""The `ctxproxy` command's offline subcommands: policy check, policy schema, prepare."""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import orjson
import pytest
from pipeline_harness import agent_history
from shared_tokens import shared_counters

from proxy import app as app_module
from proxy import prepare_cli
from proxy.cli import _parser, main, with_serve_options
from proxy.http import event_loop as event_loop_module
from proxy.settings import ConfigError, Settings
from proxy.settings.loading import load_settings

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def loaded_tokenizers(monkeypatch: pytest.MonkeyPatch) -> None:
    """`prepare` counts with the run's loaded tokenizers instead of loading its own each time."""
    monkeypatch.setattr(prepare_cli, "TokenCounters", shared_counters)


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


@pytest.fixture
def root_handlers() -> Iterator[None]:
    """`serve` replaces the root log handlers: put pytest's back afterwards."""
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved:
        root.addHandler(handler)
    root.setLevel(level)


# -- item 15: prepare, policy schema, policy check ----------------------------------------------


def small_request(tmp_path: Path) -> Path:
    request = tmp_path / "request.json"
    request.write_bytes(orjson.dumps({"model": "gpt-4o", "messages": agent_history(20, 3000)}))
    return request


def test_prepare_policy_by_name_ignores_yaml_files_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.example.yaml").write_text((REPO / "config.example.yaml").read_text())
    (tmp_path / "broken.yaml").write_text("budget: {trgger: 1}\n")
    request = small_request(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["prepare", str(request), "--policy", "coding-agent"]) == 0
    assert "coding-agent" in capsys.readouterr().err
    assert main(["prepare", str(request), "--policy", "no-such-policy"]) == 2
    err = capsys.readouterr().err
    assert "--policy" in err and "no-such-policy" in err and "coding-agent" in err


def test_prepare_policy_file_ignores_its_unrelated_neighbours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.yaml").write_text((REPO / "config.example.yaml").read_text())
    (tmp_path / "base.yaml").write_text("extends: default\nbudget: {context_window: 8000}\n")
    policy = tmp_path / "tiny.yaml"
    policy.write_text("extends: base\nbudget: {reserved_output: 1000}\n")
    request = small_request(tmp_path)
    assert main(["prepare", str(request), "--policy", str(policy)]) == 0
    table = capsys.readouterr().err
    assert "tiny" in table and "8000" in table


def test_policy_schema_without_out_prints_to_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["policy", "schema"]) == 0
    assert capsys.readouterr().out == (REPO / "policies" / "schema.json").read_text()
    assert list(tmp_path.iterdir()) == []


def test_policy_check_accepts_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.yaml").write_text((REPO / "config.example.yaml").read_text())
    good = tmp_path / "good.yaml"
    good.write_text("extends: default\nbudget: {trigger: 0.8}\n")
    assert main(["policy", "check", str(good)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok:") and "good" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("budget: {trgger: 1}\n")
    assert main(["policy", "check", str(bad)]) == 1
    assert "bad.yaml: budget.trgger: unknown key" in capsys.readouterr().out
    assert main(["policy", "check", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().out


# -- items 12 and 18: serve ---------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"ctxproxy {version('ctxproxy')}"


@pytest.mark.usefixtures("root_handlers")
def test_serve_reports_any_start_up_failure_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("policy files unreadable\nsecond line")

    monkeypatch.setattr(app_module, "_check_tenant_policies", broken)
    config = tmp_path / "c.yaml"
    config.write_text("server: {port: 0}\n")
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{config}: start-up failed: RuntimeError: policy files unreadable"]


def test_start_up_summary_names_parts_without_secrets() -> None:
    from proxy.cli import startup_summary

    settings = Settings.model_validate(
        {
            "upstreams": [
                {
                    "name": "a",
                    "base_url": "https://user:pw-Secret1@api.example/v1?key=Secret2",
                    "api_key": "sk-Secret3",
                },
                {"name": "b", "base_url": "http://127.0.0.1:9/v1"},
            ],
            "store": {"kind": "redis", "url": "redis://:Secret4@db:6379/0", "secret": "Secret5"},
            "auth": {"mode": "keys"},
            "tenants": [{"name": "acme", "keys": ["Secret6"], "upstream_key": "Secret7"}],
        }
    )
    line = startup_summary(settings, ["coding-agent", "default"], "/srv/policies")
    assert "store=redis" in line and "auth=keys" in line and "tenants=acme" in line
    assert "upstreams=a(https://api.example/v1),b(http://127.0.0.1:9/v1)" in line
    assert "policies=coding-agent,default (/srv/policies)" in line
    assert "Secret" not in line and "user" not in line


def test_a_litellm_upstream_without_a_base_url_is_shown_by_its_provider() -> None:
    from proxy.cli import startup_summary

    gemini = {"name": "gemini", "kind": "litellm", "provider": "gemini"}
    settings = Settings.model_validate({"upstreams": [gemini, {"name": "any", "kind": "litellm"}]})
    line = startup_summary(settings, ["default"], "bundled")
    assert "upstreams=gemini(litellm:gemini),any(litellm:default)" in line
    assert "://" not in line


def _serve_args(*argv: str) -> argparse.Namespace:
    return _parser().parse_args(["serve", *argv])


def test_serve_options_override_the_workers_keys(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("server: {workers: 4}\nstore: {kind: redis}\n")
    settings = load_settings(config)
    assert with_serve_options(settings, _serve_args()).server.workers == 4
    assert with_serve_options(settings, _serve_args("--workers", "auto")).server.workers == "auto"
    assert with_serve_options(settings, _serve_args("--workers", "2")).server.workers == 2


def test_serve_refuses_several_workers_on_the_memory_store_unless_allowed() -> None:
    settings = load_settings(None)
    refusal = re.escape("<embedded default>: server.workers: 2 workers")
    with pytest.raises(ConfigError, match=refusal):
        with_serve_options(settings, _serve_args("--workers", "2"))
    allowed = with_serve_options(settings, _serve_args("--workers", "2", "--allow-unshared-store"))
    assert allowed.server.allow_unshared_store is True


@pytest.mark.parametrize("wrong", ["0", "-1", "two", "257"])
def test_serve_workers_must_be_a_count_or_auto(
    wrong: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        _serve_args("--workers", wrong)
    assert "1 to 256 processes, or 'auto'" in capsys.readouterr().err


@pytest.mark.usefixtures("root_handlers")
def test_uvloop_required_but_not_installed_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(event_loop_module, "uvloop_installed", lambda: False)
    config = tmp_path / "c.yaml"
    config.write_text("server: {port: 0, event_loop: uvloop}\n")
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"{config}: server.event_loop: uvloop is not installed "
        "(pip install 'ctxproxy[uvloop]'), or choose auto"
    ]


@pytest.mark.usefixtures("root_handlers")
def test_an_unknown_loop_names_the_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("server: {port: 0, event_loop: trio}\n")
    assert main(["serve", "--config", str(config)]) == 2
    assert "server.event_loop" in capsys.readouterr().err
