from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from proxy.settings import (
    DEFAULT_OPENAI_BASE_URL,
    ConfigError,
    Settings,
    unshared_store_problem,
    usable_cpus,
)
from proxy.settings.loading import embedded_default, load_settings

REPO = Path(__file__).resolve().parents[2]


def test_embedded_default_reads_openai_base_url() -> None:
    assert embedded_default({}).upstreams[0].base_url == DEFAULT_OPENAI_BASE_URL
    custom = embedded_default({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert custom.upstreams[0].base_url == "http://127.0.0.1:9/v1"
    assert custom.store.kind == "memory" and custom.auth.mode == "passthrough"
    assert custom.server.port not in (4000, 8000, 8080, 8787)


def test_example_config_is_valid_and_expands_env() -> None:
    # the example runs passthrough, so it sets no upstream api_key (item 6): expansion is shown
    # on the tenant's upstream key instead
    env = {"OPENAI_API_KEY": "sk-up", "ACME_OPENAI_KEY": "sk-acme-up"}
    settings = load_settings(REPO / "config.example.yaml", env)
    assert settings.tenants[0].upstream_key == "sk-acme-up"
    assert settings.upstreams[0].base_url == DEFAULT_OPENAI_BASE_URL
    assert settings.tenants[0].keys == ["sk-proxy-acme-change-me"]
    custom = load_settings(REPO / "config.example.yaml", {"OPENAI_BASE_URL": "http://x:1/v1"})
    assert custom.upstreams[0].base_url == "http://x:1/v1"


def test_unknown_key_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("server:\n  prot: 1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {})
    assert str(caught.value) == f"{path}: server.prot: unknown key (did you mean 'port'?)"


def test_every_unknown_key_is_named_with_the_closest_known_one(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "stor: {kind: memory}\n"
        "upstreams: [{name: a, base_url: 'http://x', kindd: openai}]\n"
        "tenants: [{name: t, session: {sorce: header}, zzz: 1}]\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {})
    assert sorted(str(caught.value).splitlines()) == sorted([
        f"{path}: stor: unknown key (did you mean 'store'?)",
        f"{path}: upstreams.0.kindd: unknown key (did you mean 'kind'?)",
        f"{path}: tenants.0.session.sorce: unknown key (did you mean 'source'?)",
        f"{path}: tenants.0.zzz: unknown key",
    ])


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


def test_a_tenants_routes_come_before_the_global_ones(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "upstreams: [{name: a, base_url: 'http://a'}, {name: b, base_url: 'http://b'}]\n"
        "routes: [{model: 'claude-*', upstream: b}]\n"
        "tenants: [{name: t, routes: [{model: 'claude-3*', upstream: a}]}]\n"
    )
    settings = load_settings(path, {})
    own = settings.tenants[0].routes
    assert settings.upstream_for("claude-3-opus", own).name == "a"
    assert settings.upstream_for("claude-4", own).name == "b"  # falls through to the global
    assert settings.upstream_for("claude-3-opus").name == "b"  # another tenant


def test_a_tenant_route_to_an_unknown_upstream_names_tenant_and_route(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "upstreams: [{name: a, base_url: 'http://a'}]\n"
        "tenants: [{name: t}, {name: u, routes: [{model: '*', upstream: gone}]}]\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {})
    assert str(caught.value) == f"{path}: tenants.1.routes.0.upstream: unknown upstream 'gone'"


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


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def one_line_error(path: Path, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env or {})
    message = str(caught.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: "), message
    return message


# -- item 6: passthrough never lends the operator's key -----------------------------------------

OPERATOR_KEY = "sk-operator-Qw83nZtest"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("upstreams: [{name: a, base_url: 'http://a', api_key: KEY}]\n", "upstreams.0.api_key"),
        (
            "upstreams: [{name: a, base_url: 'http://a'}, {name: b, base_url: 'http://b',"
            " api_key: KEY}]\n",
            "upstreams.1.api_key",
        ),
        (
            "auth: {passthrough_tenant: acme}\n"
            "tenants: [{name: other}, {name: acme, upstream_key: KEY}]\n",
            "tenants.1.upstream_key",
        ),
    ],
)
def test_passthrough_with_an_operator_key_is_refused(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text.replace("KEY", OPERATOR_KEY))
    message = one_line_error(path)
    assert f"{path}: {key}: " in message
    assert "passthrough" in message and "allow_operator_key_in_passthrough" in message
    assert OPERATOR_KEY not in message


def test_operator_key_in_passthrough_when_explicitly_allowed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"upstreams: [{{name: a, base_url: 'http://a', api_key: {OPERATOR_KEY}}}]\n"
        "auth: {allow_operator_key_in_passthrough: true}\n",
    )
    settings = load_settings(path, {})
    assert settings.auth.allow_operator_key_in_passthrough is True
    # keys mode and empty keys are not affected
    path.write_text(
        f"upstreams: [{{name: a, base_url: 'http://a', api_key: {OPERATOR_KEY}}}]\n"
        "auth: {mode: keys}\ntenants: [{name: t, keys: [k1]}]\n"
    )
    assert load_settings(path, {}).upstreams[0].api_key == OPERATOR_KEY
    path.write_text("upstreams: [{name: a, base_url: 'http://a', api_key: ''}]\n")
    assert load_settings(path, {}).auth.mode == "passthrough"


def test_example_config_is_not_an_open_relay() -> None:
    env = {"OPENAI_API_KEY": "sk-up", "ACME_OPENAI_KEY": "sk-acme-up"}
    settings = load_settings(REPO / "config.example.yaml", env)
    assert settings.auth.mode == "passthrough"
    assert settings.auth.allow_operator_key_in_passthrough is False
    assert all(not u.api_key for u in settings.upstreams)
    passthrough = [t for t in settings.tenants if t.name == settings.auth.passthrough_tenant]
    assert all(not t.upstream_key for t in passthrough)


# -- item 12: every start-up mistake is one line naming the file and the key --------------------


def test_store_url_must_be_a_redis_url(tmp_path: Path) -> None:
    secret_url = "http://user:hunter2@127.0.0.1:6379"
    path = write(tmp_path, f"store: {{kind: redis, url: '{secret_url}'}}\n")
    message = one_line_error(path)
    assert f"{path}: store.url: " in message and "redis://" in message
    assert "hunter2" not in message
    for good in ("redis://h:6379/0", "rediss://h:6380", "unix:///tmp/redis.sock"):
        path.write_text(f"store: {{kind: redis, url: '{good}'}}\n")
        assert load_settings(path, {}).store.url == good
    path.write_text(f"store: {{kind: memory, url: '{secret_url}'}}\n")  # unused: not checked
    assert load_settings(path, {}).store.kind == "memory"


def test_a_cluster_store_url_is_a_tcp_redis_url_on_database_0(tmp_path: Path) -> None:
    path = write(tmp_path, "store: {kind: redis-cluster, url: 'unix:///tmp/redis.sock'}\n")
    message = one_line_error(path)
    assert f"{path}: store.url: " in message and "rediss://" in message
    path.write_text("store: {kind: redis-cluster, url: 'redis://:hunter2@node-0:6379/3'}\n")
    message = one_line_error(path)
    assert f"{path}: store.url: " in message and "database 0" in message
    assert "hunter2" not in message
    for good in ("redis://node-0:6379", "rediss://node-0:6380/0", "redis://node-0:7000/"):
        path.write_text(f"store: {{kind: redis-cluster, url: '{good}'}}\n")
        settings = load_settings(path, {})
        assert (settings.store.url, settings.store.shared) == (good, True)
    path.write_text("store: {kind: redis-clustr}\n")
    assert "redis-cluster" in one_line_error(path)
    path.write_text("store: {kind: redis-cluster, cluster_nodes: ['node-1:6379', '[::1]:7000']}\n")
    assert load_settings(path, {}).store.cluster_nodes == ["node-1:6379", "[::1]:7000"]
    for bad in ("node-1", "node-1:0", ":6379", "node-1:65536"):
        path.write_text(f"store: {{kind: redis-cluster, cluster_nodes: ['{bad}']}}\n")
        assert f"{path}: store.cluster_nodes: " in one_line_error(path), bad


def test_missing_policies_dir_names_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "policies_dir: nowhere\n")
    message = one_line_error(path)
    assert message.startswith(f"{path}: policies_dir: ") and "nowhere" in message
    (tmp_path / "file.yaml").write_text("")
    path.write_text("policies_dir: file.yaml\n")
    assert "not a directory" in one_line_error(path)


def test_model_level_problems_name_the_key_without_pydantic_noise(tmp_path: Path) -> None:
    path = write(tmp_path, "routes: [{model: 'gpt-*', upstream: b}]\n")
    message = one_line_error(path)
    assert message == f"{path}: routes.0.upstream: unknown upstream 'b'"


def test_invalid_yaml_is_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "server:\n  port: [1,\n")
    assert "invalid YAML" in one_line_error(path)


# -- item 16: duplicate tenants and keys --------------------------------------------------------


def test_duplicate_tenant_names_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "tenants: [{name: acme}, {name: beta}, {name: acme}]\n")
    message = one_line_error(path)
    assert message == f"{path}: tenants.2.name: tenant 'acme' is already tenants.0"


def test_duplicate_proxy_keys_are_refused_without_showing_them(tmp_path: Path) -> None:
    key = "sk-proxy-shared-Xy12test"
    path = write(
        tmp_path,
        "auth: {mode: keys}\n"
        f"tenants: [{{name: acme, keys: [k0, {key}]}}, {{name: beta, keys: [{key}]}}]\n",
    )
    message = one_line_error(path)
    assert message.startswith(f"{path}: tenants.1.keys.0: ")
    assert "'beta'" in message and "tenants.0.keys.1" in message and "'acme'" in message
    assert key not in message


def test_empty_proxy_key_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "auth: {mode: keys}\ntenants: [{name: acme, keys: [k1, '${ACME_KEY:-}']}]\n",
    )
    assert one_line_error(path).startswith(f"{path}: tenants.0.keys.1: empty key")


def test_unknown_passthrough_tenant_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "auth: {passthrough_tenant: acme}\ntenants: [{name: acmee}]\n")
    message = one_line_error(path)
    assert message.startswith(f"{path}: auth.passthrough_tenant: unknown tenant 'acme'")
    path.write_text("auth: {passthrough_tenant: default}\ntenants: [{name: acme}]\n")
    assert load_settings(path, {}).auth.passthrough_tenant == "default"


# -- item 17: a keys-mode tenant without any upstream key is reported at start-up ---------------


def test_keys_mode_tenant_without_upstream_key_is_warned(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "upstreams: [{name: a, base_url: 'http://a'}, {name: b, base_url: 'http://b',"
        " api_key: sk-b}]\n"
        "auth: {mode: keys}\n"
        "tenants: [{name: acme, keys: [k1]}, {name: beta, keys: [k2], upstream_key: sk-beta},"
        " {name: idle}]\n",
    )
    from proxy.settings.startup import startup_warnings
    warnings = startup_warnings(load_settings(path, {}))
    assert len(warnings) == 1
    [line] = warnings
    assert "tenant 'acme'" in line and "upstreams.0 'a'" in line and "Authorization" in line
    assert "sk-b" not in line
    assert startup_warnings(load_settings(None, {})) == []


# -- item 18: a relative policies_dir is relative to the config file -----------------------------


def test_relative_policies_dir_resolves_against_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_dir = tmp_path / "etc"
    (config_dir / "policies").mkdir(parents=True)
    path = config_dir / "c.yaml"
    path.write_text("policies_dir: policies\n")
    elsewhere = tmp_path / "run"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    settings = load_settings(path, {})
    assert settings.policies_dir == str(config_dir / "policies")
    path.write_text(f"policies_dir: {config_dir / 'policies'}\n")
    assert load_settings(path, {}).policies_dir == str(config_dir / "policies")


def test_metrics_auth_keys_needs_auth_mode_keys() -> None:
    base = {"upstreams": [{"name": "u", "base_url": "http://u"}]}
    with pytest.raises(ValidationError, match="metrics_auth: 'keys' needs auth mode 'keys'"):
        Settings.model_validate({**base, "server": {"metrics_auth": "keys"}})
    keys = {**base, "auth": {"mode": "keys"}, "tenants": [{"name": "t", "keys": ["k"]}]}
    assert Settings.model_validate(keys).metrics_need_a_key  # auto: keys in keys mode
    assert not Settings.model_validate(base).metrics_need_a_key  # auto: open in passthrough
    opened = Settings.model_validate({**keys, "server": {"metrics_auth": "none"}})
    assert not opened.metrics_need_a_key


# -- issue 12 item 9: sessions within a tenant --------------------------------------------------


def test_sessions_are_off_unless_a_tenant_asks_for_them(tmp_path: Path) -> None:
    path = write(tmp_path, "tenants: [{name: acme}, {name: beta, session: {}}]\n")
    acme, beta = load_settings(path, {}).tenants
    assert acme.session is None
    assert beta.session is not None
    assert (beta.session.source, beta.session.header) == ("header", "x-ctxproxy-session")


@pytest.mark.parametrize(
    ("session", "expected"),
    [
        ("{source: user}", ("user", "x-ctxproxy-session", "session_id")),
        (
            "{source: metadata, metadata_key: conversation}",
            ("metadata", "x-ctxproxy-session", "conversation"),
        ),
        ("{header: X-Session-Id}", ("header", "x-session-id", "session_id")),
    ],
)
def test_session_sources(tmp_path: Path, session: str, expected: tuple[str, str, str]) -> None:
    path = write(tmp_path, f"tenants: [{{name: acme, session: {session}}}]\n")
    found = load_settings(path, {}).tenants[0].session
    assert found is not None
    assert (found.source, found.header, found.metadata_key) == expected


@pytest.mark.parametrize(
    ("session", "key", "problem"),
    [
        ("{source: cookie}", "tenants.0.session.source", "Input should be"),
        ("{sesion: x}", "tenants.0.session.sesion", "unknown key"),
        ("{header: 'x session'}", "tenants.0.session.header", "not an HTTP header name"),
        ("{header: Authorization}", "tenants.0.session.header", "cannot name a session"),
        ("{header: x-api-key}", "tenants.0.session.header", "cannot name a session"),
        ("{source: metadata, metadata_key: ''}", "tenants.0.session.metadata_key", "empty"),
    ],
)
def test_bad_session_settings_name_the_key(
    tmp_path: Path, session: str, key: str, problem: str
) -> None:
    path = write(tmp_path, f"tenants: [{{name: acme, session: {session}}}]\n")
    message = one_line_error(path)
    assert message.startswith(f"{path}: {key}: ") and problem in message, message


def test_a_tenant_name_cannot_look_like_a_session_scope(tmp_path: Path) -> None:
    path = write(tmp_path, "tenants: [{name: 'acme#session:0123'}]\n")
    assert one_line_error(path).startswith(f"{path}: tenants.0.name: must not contain")


def test_forwarding_headers_are_dropped_unless_an_upstream_passes_them(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "upstreams:\n"
        "  - {name: a, base_url: 'http://a/v1'}\n"
        "  - {name: b, base_url: 'http://b/v1', forwarded_headers: pass}\n",
    )
    first, second = load_settings(path, {}).upstreams
    assert (first.forwarded_headers, second.forwarded_headers) == ("drop", "pass")
    path = write(tmp_path, "upstreams: [{name: a, base_url: 'http://a', forwarded_headers: yes}]")
    assert one_line_error(path).startswith(f"{path}: upstreams.0.forwarded_headers: ")


def test_workers_is_a_count_or_auto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("server: {workers: 3}\nstore: {kind: redis}\n")
    assert load_settings(config).server.worker_count() == 3
    config.write_text("server: {workers: auto}\nstore: {kind: redis}\n")
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 5})
    monkeypatch.setattr("proxy.settings.CGROUP_CPU_MAX", tmp_path / "no-quota")
    assert load_settings(config).server.worker_count() == 3
    for wrong in ("0", "many", "-2"):
        config.write_text(f"server: {{workers: {wrong}}}\n")
        with pytest.raises(ConfigError, match=re.escape(f"{config}: server.workers")):
            load_settings(config)


def test_several_workers_on_the_memory_store_are_a_problem_unless_allowed(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("server: {workers: 2}\n")
    problem = unshared_store_problem(load_settings(config))
    assert problem.startswith("server.workers: 2 workers on store.kind 'memory'")
    config.write_text("server: {workers: 2, allow_unshared_store: true}\n")
    assert unshared_store_problem(load_settings(config)) == ""
    config.write_text("server: {workers: 2}\nstore: {kind: redis}\n")
    assert unshared_store_problem(load_settings(config)) == ""
    config.write_text("server: {workers: 1}\n")
    assert unshared_store_problem(load_settings(config)) == ""


@pytest.mark.parametrize(
    ("cpu_max", "cpus"), [("max 100000\n", 6), ("200000 100000\n", 2), ("150000 100000", 2),
                          ("50000 100000", 1), ("garbled", 6)]
)
def test_auto_workers_stay_within_the_cgroup_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_max: str, cpus: int
) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(6)))
    (tmp_path / "cpu.max").write_text(cpu_max)
    assert usable_cpus(tmp_path / "cpu.max") == cpus
    assert usable_cpus(tmp_path / "absent") == 6
