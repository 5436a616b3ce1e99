"""Server configuration: the settings models, validated strictly (`extra="forbid"`, problems
as `key.path: problem` lines). Reading config.yaml and the environment is `settings.loading`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from proxy.settings.cache import PromptCacheSettings as PromptCacheSettings
from proxy.settings.prices import PriceSettings as PriceSettings
from proxy.settings.records import RecordsSettings as RecordsSettings
from proxy.settings.store import StoreSettings as StoreSettings
from proxy.settings.store import WriteBudgetSettings as WriteBudgetSettings

DEFAULT_PORT = 8531
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TENANT = "default"
MAX_PARSED_RESPONSE_BYTES = 32 * 1024 * 1024
MAX_WORKERS = 256


class ConfigError(Exception):
    """A config problem; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = DEFAULT_PORT
    max_body_bytes: Annotated[int, Field(gt=0)] = Field(
        default=32 * 1024 * 1024,
        description="Largest request body (else 413 request_too_large), as sent and, for a "
        "compressed one, once decoded.",
    )
    max_parsed_response_bytes: Annotated[int, Field(gt=0)] = Field(
        default=MAX_PARSED_RESPONSE_BYTES,
        description="Largest upstream answer the proxy reads whole to run its tools (else 502 "
        "upstream_response_too_large), counted once decoded; relayed answers stream and have "
        "no cap.",
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
    records: RecordsSettings = Field(default_factory=RecordsSettings)
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="auto",
        description="The event loop `serve` runs on: 'auto' is uvloop when it is installed "
        "(the `uvloop` extra), else asyncio's own.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = Field(
        default="json", description="json: one JSON object per line; text: plain lines."
    )
    workers: Annotated[int, Field(ge=1, le=MAX_WORKERS)] | Literal["auto"] = Field(
        default=1,
        description="Server processes sharing the port ('auto': one per CPU the process may "
        "use); with more than one, store.kind must be 'redis' unless allow_unshared_store.",
    )
    allow_unshared_store: bool = Field(
        default=False,
        description="Let several workers run on the memory store: each worker then has its own "
        "artifacts, and a read that reaches another worker finds nothing.",
    )

    def worker_count(self) -> int:
        """`workers`, with 'auto' resolved to the CPUs this process may run on."""
        if self.workers != "auto":
            return self.workers
        return min(MAX_WORKERS, usable_cpus())


CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def usable_cpus(cpu_max: Path | None = None) -> int:
    """The CPUs this process may use, at least 1: its affinity mask (taskset, cpusets), and no
    more than its cgroup's CPU quota rounded up (a container's `--cpus`, a pod's CPU limit)."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        count = os.cpu_count() or 1
    try:
        quota, period = (cpu_max or CGROUP_CPU_MAX).read_text().split()[:2]
        if quota != "max":
            count = min(count, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota here
    return max(1, count)


class TimeoutSettings(_Strict):
    connect_s: Annotated[float, Field(gt=0)] = 10.0
    first_byte_s: Annotated[float, Field(gt=0)] = 120.0
    idle_read_s: Annotated[float, Field(gt=0)] = 120.0
    total_s: Annotated[float, Field(gt=0)] | None = 900.0


class UpstreamSettings(_Strict):
    name: str
    kind: str = Field(
        default="openai",
        description="How to talk to it: a registered upstream kind (`openai`: OpenAI-compatible "
        "HTTP, base_url is the API root such as https://api.openai.com/v1; `anthropic`: native "
        "Messages HTTP, base_url such as https://api.anthropic.com, /v1 added when missing; "
        "`litellm`: any provider through litellm, named by `provider`).",
    )
    base_url: str = Field(
        default="", description="The API root; a `litellm` upstream may leave it to litellm."
    )
    provider: str | None = Field(
        default=None,
        description="`litellm` only: the model's provider prefix (`anthropic`, `gemini`, ...).",
    )
    api_key: str | None = Field(
        default=None, description="Sent when the tenant has no key of its own."
    )
    timeouts: TimeoutSettings = Field(default_factory=TimeoutSettings)
    max_connections: Annotated[int, Field(gt=0)] = 256
    prompt_cache: PromptCacheSettings = Field(
        default_factory=PromptCacheSettings,
        description="How long the provider keeps a sent prompt cached (cuts go deeper once a "
        "conversation's cache is cold).",
    )
    forwarded_headers: Literal["drop", "pass"] = Field(
        default="drop",
        description="The client's Forwarded, Via, X-Real-IP and X-Forwarded-* headers: 'drop' "
        "(a client could claim any address to this upstream) or 'pass' (the proxy sits behind "
        "one of the operator's, which sets them).",
    )

    def where(self) -> str:
        """Where it is, fit for a log line: scheme://host[:port]/path (never the user info or
        the query: they may hold secrets), or `litellm:<provider>` without a base URL."""
        if not self.base_url:
            return f"{self.kind}:{self.provider or 'default'}"
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"

    @model_validator(mode="after")
    def _needs_a_base_url(self) -> UpstreamSettings:
        if not self.base_url and self.kind != "litellm":
            raise ValueError(f"base_url: required for an upstream of kind {self.kind!r}")
        return self


class RouteSettings(_Strict):
    model: str = Field(description="Glob on the request's model, first match wins.")
    upstream: str


SESSION_SCOPE_MARK = "#session:"
"""Between a tenant's scope and the hash of a session (so no tenant name may contain it)."""
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_NOT_SESSION_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "host", "content-type", "content-length"}
)


class SessionSettings(_Strict):
    """Sessions within a tenant: each session value gets its own artifact scope (and its own
    `artifacts.max_per_scope` cap); requests without one keep the tenant's scope."""

    source: Literal["header", "user", "metadata"] = Field(
        default="header",
        description="Where a request names its session: a request header (`header`), the "
        "body's `user` field, or a key of the body's `metadata` object (`metadata_key`).",
    )
    header: str = Field(
        default="x-ctxproxy-session",
        description="source header: the header's name (x-ctxproxy-* headers never go upstream).",
    )
    metadata_key: str = Field(
        default="session_id", description="source metadata: the key in the body's `metadata`."
    )

    @field_validator("header")
    @classmethod
    def _header_name(cls, header: str) -> str:
        if not _HEADER_NAME.fullmatch(header):
            raise ValueError(f"not an HTTP header name: {header!r}")
        if header.lower() in _NOT_SESSION_HEADERS:
            raise ValueError(f"{header!r} cannot name a session (credential or framing header)")
        return header.lower()

    @field_validator("metadata_key")
    @classmethod
    def _metadata_key(cls, key: str) -> str:
        if not key:
            raise ValueError("must not be empty")
        return key


class TenantSettings(_Strict):
    name: str
    keys: list[str] = Field(default_factory=list, description="Proxy API keys of this tenant.")
    policy: str = "default"
    upstream_key: str | None = None
    session: SessionSettings | None = Field(
        default=None,
        description="Optional sessions within this tenant (artifact scope per session).",
    )
    routes: list[RouteSettings] = Field(
        default_factory=list,
        description="This tenant's own routes, tried before the global `routes`.",
    )
    write_budget: WriteBudgetSettings | None = Field(
        default=None,
        description="This tenant's own write budget: the keys it sets replace those of "
        "`store.write_budget` (in passthrough mode, the passthrough tenant's applies to every "
        "credential).",
    )

    @field_validator("name")
    @classmethod
    def _name_leaves_room_for_sessions(cls, name: str) -> str:
        if SESSION_SCOPE_MARK in name:
            raise ValueError(f"must not contain {SESSION_SCOPE_MARK!r} (it marks session scopes)")
        if "\x00" in name:
            raise ValueError("must not contain a NUL character (it marks derived scopes)")
        return name


class AuthSettings(_Strict):
    mode: Literal["passthrough", "keys"] = "passthrough"
    passthrough_tenant: str = Field(
        default=DEFAULT_TENANT, description="Tenant used in passthrough mode."
    )
    allow_operator_key_in_passthrough: bool = Field(
        default=False,
        description="Let an upstream api_key (or the passthrough tenant's upstream_key) replace "
        "every client's credentials in passthrough mode: anyone who reaches the proxy then uses "
        "the operator's key.",
    )
    operator_keys: list[str] = Field(
        default_factory=list,
        description="Keys that read every tenant's request records (GET /v1/context/requests, "
        "/v1/context/stats, /v1/context/policy), in both modes; they serve no other route.",
    )


class Settings(_Strict):
    server: ServerSettings = Field(default_factory=ServerSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    upstreams: list[UpstreamSettings] = Field(default_factory=list)
    routes: list[RouteSettings] = Field(default_factory=list)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    tenants: list[TenantSettings] = Field(default_factory=list)
    policies_dir: str | None = Field(default=None, description="Directory of policy YAML files.")
    prices: list[PriceSettings] = Field(
        default_factory=list, description="Price overrides by model glob (before litellm's map)."
    )
    source: str = Field(default="<embedded default>", exclude=True)

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        """Cross-key checks: every problem is one `key.path: problem` line."""
        problems = [
            *_reference_problems(self),
            *_tenant_problems(self.tenants, self.auth),
            *_open_relay_problems(self),
        ]
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def upstream_for(
        self, model: str, tenant_routes: Sequence[RouteSettings] = ()
    ) -> UpstreamSettings:
        """The tenant's routes, then the global ones (first glob match wins), else the first."""
        routes = [*tenant_routes, *self.routes]
        wanted = next((r.upstream for r in routes if fnmatchcase(model, r.model)), None)
        return next((u for u in self.upstreams if u.name == wanted), self.upstreams[0])

    @model_validator(mode="after")
    def _metrics_keys_need_keys_mode(self) -> Settings:
        if self.server.metrics_auth == "keys" and self.auth.mode != "keys":
            raise ValueError(
                "server.metrics_auth: 'keys' needs auth mode 'keys' (in passthrough mode any "
                "credential is accepted)"
            )
        return self

    def write_budget_for(self, tenant: str) -> WriteBudgetSettings:
        """The write budget of tenant `tenant`: the store's, with the keys the tenant sets."""
        own = next((t.write_budget for t in self.tenants if t.name == tenant), None)
        return self.store.write_budget.overridden_by(own)

    @property
    def metrics_need_a_key(self) -> bool:
        auth = self.server.metrics_auth
        return auth == "keys" or (auth == "auto" and self.auth.mode == "keys")


def unshared_store_problem(settings: Settings) -> str:
    """Why these workers would not share their artifacts ("" when they would, or may)."""
    server = settings.server
    count = server.worker_count()
    if count == 1 or settings.store.kind != "memory" or server.allow_unshared_store:
        return ""
    return (
        f"server.workers: {count} workers on store.kind 'memory' would not share artifacts (an "
        "artifact one worker stored is not found by another): use store.kind 'redis', or set "
        "server.allow_unshared_store: true (--allow-unshared-store)"
    )


def _reference_problems(settings: Settings) -> list[str]:
    names = {u.name for u in settings.upstreams}
    if not names:
        return ["upstreams: at least one upstream is required"]
    problems = [
        f"routes.{i}.upstream: unknown upstream {route.upstream!r}"
        for i, route in enumerate(settings.routes)
        if route.upstream not in names
    ]
    problems += [
        f"tenants.{t}.routes.{i}.upstream: unknown upstream {route.upstream!r}"
        for t, tenant in enumerate(settings.tenants)
        for i, route in enumerate(tenant.routes)
        if route.upstream not in names
    ]
    problems += [
        f"prices.{i}.upstream: unknown upstream {price.upstream!r}"
        for i, price in enumerate(settings.prices)
        if price.upstream is not None and price.upstream not in names
    ]
    if settings.auth.mode == "keys" and not any(t.keys for t in settings.tenants):
        problems.append("tenants: auth mode 'keys' needs at least one tenant with keys")
    return problems


def _tenant_problems(tenants: list[TenantSettings], auth: AuthSettings) -> list[str]:
    """Unique tenant names; unique, non-empty proxy keys (never shown: they are secrets)."""
    problems: list[str] = []
    first_named: dict[str, int] = {}
    first_key: dict[str, str] = {}
    for i, tenant in enumerate(tenants):
        if tenant.name in first_named:
            first = first_named[tenant.name]
            problems.append(f"tenants.{i}.name: tenant {tenant.name!r} is already tenants.{first}")
        first_named.setdefault(tenant.name, i)
        for j, key in enumerate(tenant.keys):
            where = f"tenants.{i}.keys.{j}"
            if not key:
                problems.append(f"{where}: empty key (is its environment variable set?)")
            elif key in first_key:
                problems.append(
                    f"{where}: tenant {tenant.name!r} has the same proxy key as {first_key[key]}"
                )
            else:
                first_key[key] = f"{where} (tenant {tenant.name!r})"
    for j, key in enumerate(auth.operator_keys):
        if not key or key in first_key:
            why = f"is also {first_key[key]}" if key else "empty key"
            problems.append(f"auth.operator_keys.{j}: {why}")
    wanted = auth.passthrough_tenant
    if wanted not in first_named and wanted != DEFAULT_TENANT:
        known = ", ".join(first_named) or "none"
        problems.append(f"auth.passthrough_tenant: unknown tenant {wanted!r} (tenants: {known})")
    return problems


def _open_relay_problems(settings: Settings) -> list[str]:
    """Passthrough auth forwards the client's own key; an operator key would replace it for anyone
    who reaches the proxy, with or without a key of their own."""
    auth = settings.auth
    if auth.mode != "passthrough" or auth.allow_operator_key_in_passthrough:
        return []
    keys = [f"upstreams.{i}.api_key" for i, u in enumerate(settings.upstreams) if u.api_key]
    keys += [
        f"tenants.{i}.upstream_key"
        for i, t in enumerate(settings.tenants)
        if t.name == auth.passthrough_tenant and t.upstream_key
    ]
    return [
        f"{key}: an operator key in passthrough mode would be sent for every client, with or "
        "without a key of its own (an open relay); remove it, use auth.mode: keys, or set "
        "auth.allow_operator_key_in_passthrough: true"
        for key in keys
    ]
