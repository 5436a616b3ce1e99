"""What ships: the wheel's package data, the license, and the container image's recipe."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

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


def test_the_wheel_carries_every_console_file() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["proxy"]
    files = [f"http/ui/{p.name}" for p in (REPO / "proxy" / "http" / "ui").iterdir()]
    assert "http/ui/index.html" in files and "http/ui/main.js" in files
    for name in files:
        assert any(fnmatchcase(name, pattern) for pattern in patterns), name
