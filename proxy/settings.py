"""Server configuration: config.yaml plus the environment, validated strictly.

This is the only module that reads `os.environ`. Values written as `${NAME}` or `${NAME:-default}`
in the config file are expanded from the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

DEFAULT_PORT = 8531
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
MAX_PARSED_RESPONSE_BYTES = 32 * 1024 * 1024
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigError(Exception):
    """A config problem; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = DEFAULT_PORT
    max_body_bytes: Annotated[int, Field(gt=0)] = 32 * 1024 * 1024
    max_parsed_response_bytes: Annotated[int, Field(gt=0)] = Field(
        default=MAX_PARSED_RESPONSE_BYTES,
        description="Largest upstream answer the proxy reads whole to run its tools (else 502 "
        "upstream_response_too_large); relayed answers stream and have no cap.",
    )
    header_timeout_s: Annotated[float, Field(gt=0)] = Field(
        default=10.0, description="A request's headers must arrive within this (else 408)."
    )
    body_timeout_s: Annotated[float, Field(gt=0)] = Field(
        default=60.0, description="A request's body must arrive within this (else 408)."
    )
    metrics_auth: Literal["auto", "none", "keys"] = Field(
        default="auto",
        description="GET /metrics: 'keys' needs a proxy key (auth mode 'keys'), 'none' is open; "
        "'auto' is 'keys' in auth mode 'keys' (labels name tenants), else 'none'.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = Field(
        default="json", description="json: one JSON object per line; text: plain lines."
    )


class StoreSettings(_Strict):
    kind: Literal["memory", "redis"] = "memory"
    url: str = "redis://127.0.0.1:6379/0"
    key_prefix: str = "ctxproxy:"
    secret: str = Field(
        default="", description="HMAC secret for artifact ids; random per process if empty."
    )
    pool_size: Annotated[int, Field(gt=0)] = 64
    pool_timeout_s: Annotated[float, Field(gt=0)] = 2.0
    socket_timeout_s: Annotated[float, Field(gt=0)] = 2.0


class TimeoutSettings(_Strict):
    connect_s: Annotated[float, Field(gt=0)] = 10.0
    first_byte_s: Annotated[float, Field(gt=0)] = 120.0
    idle_read_s: Annotated[float, Field(gt=0)] = 120.0
    total_s: Annotated[float, Field(gt=0)] | None = 900.0


class UpstreamSettings(_Strict):
    name: str
    base_url: str
    api_key: str | None = Field(
        default=None, description="Sent when the tenant has no key of its own."
    )
    timeouts: TimeoutSettings = Field(default_factory=TimeoutSettings)
    max_connections: Annotated[int, Field(gt=0)] = 256


class RouteSettings(_Strict):
    model: str = Field(description="Glob on the request's model, first match wins.")
    upstream: str


class TenantSettings(_Strict):
    name: str
    keys: list[str] = Field(default_factory=list, description="Proxy API keys of this tenant.")
    policy: str = "default"
    upstream_key: str | None = None


class AuthSettings(_Strict):
    mode: Literal["passthrough", "keys"] = "passthrough"
    passthrough_tenant: str = Field(
        default="default", description="Tenant used in passthrough mode."
    )


class Settings(_Strict):
    server: ServerSettings = Field(default_factory=ServerSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    upstreams: list[UpstreamSettings] = Field(default_factory=list)
    routes: list[RouteSettings] = Field(default_factory=list)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    tenants: list[TenantSettings] = Field(default_factory=list)
    policies_dir: str | None = Field(default=None, description="Directory of policy YAML files.")
    source: str = Field(default="<embedded default>", exclude=True)

    @model_validator(mode="after")
    def _references_exist(self) -> Settings:
        names = {u.name for u in self.upstreams}
        if not names:
            raise ValueError("upstreams: at least one upstream is required")
        for i, route in enumerate(self.routes):
            if route.upstream not in names:
                raise ValueError(f"routes.{i}.upstream: unknown upstream {route.upstream!r}")
        if self.auth.mode == "keys" and not any(t.keys for t in self.tenants):
            raise ValueError("tenants: auth mode 'keys' needs at least one tenant with keys")
        return self

    def upstream_for(self, model: str) -> UpstreamSettings:
        wanted = next((r.upstream for r in self.routes if fnmatchcase(model, r.model)), None)
        return next((u for u in self.upstreams if u.name == wanted), self.upstreams[0])

    @model_validator(mode="after")
    def _metrics_keys_need_keys_mode(self) -> Settings:
        if self.server.metrics_auth == "keys" and self.auth.mode != "keys":
            raise ValueError(
                "server.metrics_auth: 'keys' needs auth mode 'keys' (in passthrough mode any "
                "credential is accepted)"
            )
        return self

    @property
    def metrics_need_a_key(self) -> bool:
        auth = self.server.metrics_auth
        return auth == "keys" or (auth == "auto" and self.auth.mode == "keys")


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
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    try:
        expanded = expand_env(raw, env)
        if "upstreams" not in expanded:
            expanded["upstreams"] = [embedded_default(env).upstreams[0].model_dump()]
        return Settings.model_validate({**expanded, "source": str(path)})
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except ValidationError as exc:
        raise ConfigError(_format_validation(path, exc)) from exc


def _format_validation(path: Path, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        problem = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"{path}: {key}: {problem}")
    return "\n".join(lines)
