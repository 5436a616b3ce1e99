"""What ships: the wheel's package data, the license, and the container image's recipe."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

from proxy.settings.loading import load_settings

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_carries_every_bundled_policy_file_and_the_schema() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["proxy"]
    bundled = REPO / "proxy" / "policies"
    files = [f"policies/{p.name}" for p in bundled.iterdir() if not p.name.startswith(".")]
    assert "policies/schema.json" in files
    for name in files:
        assert any(fnmatchcase(name, pattern) for pattern in patterns), name


def test_license_is_the_apache_2_text_named_in_pyproject() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License")
    assert "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


def test_dockerfile_has_a_healthcheck_and_a_documented_config_mount() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    instructions = [
        line.split()[0]
        for line in dockerfile.splitlines()
        if line.strip() and not line.startswith((" ", "#"))
    ]
    assert "HEALTHCHECK" in instructions
    assert "/healthz" in dockerfile
    assert "/etc/ctxproxy/config.yaml" in dockerfile
    readme = (REPO / "README.md").read_text()
    assert "/etc/ctxproxy/config.yaml" in readme and "docker run" in readme


def _readme_yaml_blocks(section: str) -> list[str]:
    readme = (REPO / "README.md").read_text()
    text = readme.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [block.split("\n", 1)[1] for block in text.split("```yaml")[1:]]


def test_the_readmes_replica_deployment_loads_and_matches_its_compose_file(
    tmp_path: Path,
) -> None:
    """The "Operating" section's config is a valid config on a Redis Cluster, and its compose
    file runs two proxies with it on six cluster nodes (no Docker engine here: parsed only)."""
    config_text, compose_text = (b.split("```", 1)[0] for b in _readme_yaml_blocks("Operating"))
    (tmp_path / "policies").mkdir()
    (tmp_path / "config.yaml").write_text(config_text)
    settings = load_settings(tmp_path / "config.yaml", {"CTXPROXY_SECRET": "s3cret"})
    assert (settings.store.kind, settings.store.secret) == ("redis-cluster", "s3cret")
    compose = yaml.safe_load(compose_text)["services"]
    assert compose["proxy"]["deploy"]["replicas"] == 2
    assert "/etc/ctxproxy/config.yaml" in compose["proxy"]["command"]
    nodes = [name for name in compose if name.startswith("redis-") and name != "redis-init"]
    assert len(nodes) == 6 and all("--cluster-enabled" in compose[n]["command"] for n in nodes)
    assert str(settings.store.url).startswith(f"redis://{nodes[0]}:")


def test_the_wheel_carries_every_console_file() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["proxy"]
    files = [f"http/ui/{p.name}" for p in (REPO / "proxy" / "http" / "ui").iterdir()]
    assert "http/ui/index.html" in files and "http/ui/main.js" in files
    for name in files:
        assert any(fnmatchcase(name, pattern) for pattern in patterns), name
