from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from proxy.settings import (
    DEFAULT_OPENAI_BASE_URL,
    ConfigError,
    Settings,
    embedded_default,
    load_settings,
)

REPO = Path(__file__).resolve().parents[1]


def test_embedded_default_reads_openai_base_url() -> None:
    assert embedded_default({}).upstreams[0].base_url == DEFAULT_OPENAI_BASE_URL
    custom = embedded_default({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert custom.upstreams[0].base_url == "http://127.0.0.1:9/v1"
    assert custom.store.kind == "memory" and custom.auth.mode == "passthrough"
    assert custom.server.port not in (4000, 8000, 8080, 8787)


def test_example_config_is_valid_and_expands_env() -> None:
    settings = load_settings(REPO / "config.example.yaml", {"OPENAI_API_KEY": "sk-up"})
    assert settings.upstreams[0].api_key == "sk-up"
    assert settings.upstreams[0].base_url == DEFAULT_OPENAI_BASE_URL
    assert settings.tenants[0].keys == ["sk-proxy-acme-change-me"]


def test_unknown_key_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("server:\n  prot: 1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {})
    assert str(caught.value) == f"{path}: server.prot: unknown key"


def test_wrong_type_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("server:\n  port: many\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {})
    assert str(caught.value).startswith(f"{path}: server.port: ")


def test_missing_env_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("upstreams:\n  - name: a\n    base_url: ${NOPE}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {})
    assert "upstreams.0.base_url: environment variable NOPE is not set" in str(caught.value)


def test_route_to_unknown_upstream_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "upstreams: [{name: a, base_url: 'http://x'}]\nroutes: [{model: 'gpt-*', upstream: b}]\n"
    )
    with pytest.raises(ConfigError, match="unknown upstream 'b'"):
        load_settings(path, {})


def test_keys_mode_needs_keys(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("auth: {mode: keys}\n")
    with pytest.raises(ConfigError, match="needs at least one tenant with keys"):
        load_settings(path, {})


def test_routes_pick_upstream_by_model_glob(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "upstreams: [{name: a, base_url: 'http://a'}, {name: b, base_url: 'http://b'}]\n"
        "routes: [{model: 'claude-*', upstream: b}]\n"
    )
    settings = load_settings(path, {})
    assert settings.upstream_for("claude-3").name == "b"
    assert settings.upstream_for("gpt-4o").name == "a"


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "missing.yaml", {})
    bad = tmp_path / "bad.yaml"
    bad.write_text("server: [\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_settings(bad, {})
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_settings(listed, {})


def test_metrics_auth_keys_needs_auth_mode_keys() -> None:
    base = {"upstreams": [{"name": "u", "base_url": "http://u"}]}
    with pytest.raises(ValidationError, match="metrics_auth: 'keys' needs auth mode 'keys'"):
        Settings.model_validate({**base, "server": {"metrics_auth": "keys"}})
    keys = {**base, "auth": {"mode": "keys"}, "tenants": [{"name": "t", "keys": ["k"]}]}
    assert Settings.model_validate(keys).metrics_need_a_key  # auto: keys in keys mode
    assert not Settings.model_validate(base).metrics_need_a_key  # auto: open in passthrough
    opened = Settings.model_validate({**keys, "server": {"metrics_auth": "none"}})
    assert not opened.metrics_need_a_key
