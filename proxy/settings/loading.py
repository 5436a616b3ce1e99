"""config.yaml plus the environment -> `Settings`, with errors that name the file and the key.

This is the only module that reads `os.environ`. Values written as `${NAME}` or `${NAME:-default}`
in the config file are expanded from the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from proxy.settings import DEFAULT_OPENAI_BASE_URL, ConfigError, Settings, UpstreamSettings
from proxy.settings.suggest import unknown_key

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any, env: Mapping[str, str], where: str = "") -> Any:
    """Replace `${NAME}` / `${NAME:-default}` in every string of a parsed YAML tree."""
    if isinstance(value, dict):
        return {
            k: expand_env(v, env, f"{where}.{k}" if where else str(k)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [expand_env(v, env, f"{where}.{i}") for i, v in enumerate(value)]
    if isinstance(value, str):
        return _ENV_REF.sub(lambda m: _env_value(m, env, where), value)
    return value


def _env_value(match: re.Match[str], env: Mapping[str, str], where: str) -> str:
    name, default = match.group(1), match.group(2)
    if name in env:
        return env[name]
    if default is not None:
        return default
    raise ConfigError(f"{where}: environment variable {name} is not set")


def embedded_default(env: Mapping[str, str] | None = None) -> Settings:
    """No config file: memory store, default policy, upstream from OPENAI_BASE_URL, passthrough."""
    env = os.environ if env is None else env
    base_url = env.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
    return Settings(upstreams=[UpstreamSettings(name="default", base_url=base_url)])


def load_settings(path: str | Path | None, env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    if path is None:
        return embedded_default(env)
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {_yaml_problem(exc)}") from exc
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    try:
        expanded = expand_env(raw, env)
        if "upstreams" not in expanded:
            expanded["upstreams"] = [embedded_default(env).upstreams[0].model_dump()]
        settings = Settings.model_validate({**expanded, "source": str(path)})
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except ValidationError as exc:
        raise ConfigError(_format_validation(path, exc)) from exc
    return _with_policies_dir(settings, path)


def _with_policies_dir(settings: Settings, path: Path) -> Settings:
    """A relative `policies_dir` is relative to the config file; it must be a directory."""
    if settings.policies_dir is None:
        return settings
    directory = path.parent / Path(settings.policies_dir).expanduser()
    if not directory.exists():
        raise ConfigError(f"{path}: policies_dir: {directory}: no such directory")
    if not directory.is_dir():
        raise ConfigError(f"{path}: policies_dir: {directory}: not a directory")
    return settings.model_copy(update={"policies_dir": str(directory)})


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: where and what (PyYAML's own text spans several lines)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "syntax error"
        return f"invalid YAML: {where}{problem}"
    return f"invalid YAML: {' '.join(str(exc).split())}"


def _format_validation(path: Path, exc: ValidationError) -> str:
    """`file: key.path: problem` lines; model-level problems carry their own key paths."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            problems = [unknown_key(Settings, err["loc"])]
        else:
            problems = str(err["msg"]).removeprefix("Value error, ").splitlines()
        lines += [f"{path}: {key}: {p}" if key else f"{path}: {p}" for p in problems]
    return "\n".join(lines)
