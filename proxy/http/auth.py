"""Who is calling: proxy API keys -> tenant (policy, upstream credentials, artifact scope)."""

from __future__ import annotations

import functools
import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from proxy.errors import ErrorCode, ProxyError
from proxy.settings import (
    SESSION_SCOPE_MARK,
    RouteSettings,
    SessionSettings,
    Settings,
    TenantSettings,
    UpstreamSettings,
)
from proxy.tokens.calibration_rule import contributor_id
from proxy.upstream.headers import CREDENTIAL_HEADERS

PASSTHROUGH_MEMO_SIZE = 1024
_BARE_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "negotiate"})
"""An Authorization value that is only one of these carries no secret: no credential."""


@dataclass(frozen=True)
class Tenant:
    name: str
    policy: str
    scope: str
    upstream_key: str | None
    passthrough: bool
    """True when the client's own Authorization is meant for the upstream."""
    session: SessionSettings | None = None
    """Where this tenant's requests name a session (None: no sessions)."""
    routes: tuple[RouteSettings, ...] = ()
    """The tenant's own routes, tried before the global ones."""
    anonymous: bool = False
    """Passthrough without any credential: a scope for this request only, nothing stored."""
    operator: bool = False
    """An operator key (`auth.operator_keys`): reads every tenant's records, serves nothing
    else."""

    @property
    def owner_scope(self) -> str:
        """The scope without its session: where the tenant's request records are kept."""
        return self.scope.partition(SESSION_SCOPE_MARK)[0]

    @functools.cached_property
    def contributor(self) -> str:
        """Whose samples the count calibration learns: a hash of the tenant's scope without its
        session (one tenant, or one passthrough credential, is one contributor however many
        sessions it names); "" without a credential (such a request teaches nothing)."""
        if self.anonymous:
            return ""
        return contributor_id(self.owner_scope)

    def in_session(self, value: str | None) -> Tenant:
        """This tenant within session `value`: the tenant's scope plus a hash of the value, so
        that a session can name no other tenant's scope, nor another session's. No value (or a
        tenant without sessions): the tenant as it is."""
        if not value or self.session is None:
            return self
        return replace(self, scope=f"{self.scope}{SESSION_SCOPE_MARK}{session_digest(value)}")

    def in_body_session(self, body: Mapping[str, Any]) -> Tenant:
        """In the session the request body names (sources `user` and `metadata`)."""
        if self.session is None or self.session.source == "header":
            return self
        return self.in_session(_body_session(self.session, body))

    def in_query_session(self, query: Mapping[str, str]) -> Tenant:
        """In the session a GET names with `?session=` (sources `user` and `metadata`: a GET has
        no body)."""
        if self.session is None or self.session.source == "header":
            return self
        return self.in_session(query.get("session"))

    def upstream_authorization(self, upstream: UpstreamSettings) -> str | None:
        """Header value to send upstream; None keeps the client's, "" sends none."""
        key = self.upstream_key or upstream.api_key
        if key:
            return f"Bearer {key}"
        return None if self.passthrough else ""


OPERATOR = Tenant("operator", "default", "", None, False, operator=True)
"""Who an operator key is: no scope of its own."""


def session_digest(value: str) -> str:
    """What a session value is known by in scopes and records (never the value itself)."""
    return hashlib.sha256(value.encode()).hexdigest()[:32]


def session_of(scope: str) -> str | None:
    """The session digest a scope names, if it names one."""
    _, mark, digest = scope.partition(SESSION_SCOPE_MARK)
    return digest if mark else None


def bearer_token(headers: Mapping[str, str]) -> str | None:
    value = headers.get("Authorization")
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    return headers.get("x-api-key") or headers.get("api-key") or None


def client_credential(headers: Mapping[str, str]) -> str | None:
    """Every credential the client presented, as one string; None when it presented none.

    A lone key (a Bearer token, `x-api-key` or `api-key`) stands for itself; anything else (Basic
    or another scheme, several credentials at once) is the header names with their values. Two
    clients share a scope only if they present the same secret."""
    present = [
        (name, value)
        for name in CREDENTIAL_HEADERS
        for value in (v.strip() for v in _values(headers, name))
        if value and value.lower() not in _BARE_SCHEMES
    ]
    if not present:
        return None
    if len(present) == 1:
        name, value = present[0]
        if name != "authorization":
            return value
        token = bearer_token({"Authorization": value})
        if token is not None:
            return token
    return "\n".join(f"{name}: {value}" for name, value in present)


def _body_session(settings: SessionSettings, body: Mapping[str, Any]) -> str | None:
    if settings.source == "user":
        value = body.get("user")
    else:
        metadata = body.get("metadata")
        value = metadata.get(settings.metadata_key) if isinstance(metadata, dict) else None
    return value if isinstance(value, str) else None


def _header_session(settings: SessionSettings, headers: Mapping[str, str]) -> str | None:
    values = _values(headers, settings.header)
    return ", ".join(values) if values else None  # repeats read as one list, as in HTTP


def _values(headers: Mapping[str, str], name: str) -> list[str]:
    getall = getattr(headers, "getall", None)  # multidicts keep repeated headers
    if getall is not None:
        return list(getall(name, []))
    return [v for k, v in headers.items() if k.lower() == name]


class TenantResolver:
    """Headers -> `Tenant`. In passthrough mode the tenants of the last `memo_size` credentials
    are remembered (hashing every request's credentials again costs ~10x the lookup)."""

    def __init__(self, settings: Settings, *, memo_size: int = PASSTHROUGH_MEMO_SIZE) -> None:
        self._mode = settings.auth.mode
        self._by_key = {key: t for t in settings.tenants for key in t.keys}
        self._passthrough = next(
            (t for t in settings.tenants if t.name == settings.auth.passthrough_tenant),
            TenantSettings(name=settings.auth.passthrough_tenant),
        )
        self._memo_size = memo_size
        self._seen: dict[tuple[tuple[str, ...], ...], Tenant] = {}
        self._operators = frozenset(settings.auth.operator_keys)

    @property
    def has_operators(self) -> bool:
        return bool(self._operators)

    def resolve(self, headers: Mapping[str, str], *, operator_route: bool = False) -> Tenant:
        """The caller's tenant; within the session its headers name (source `header`). On an
        `operator_route`, an operator key is `OPERATOR`."""
        if operator_route and self._operators and bearer_token(headers) in self._operators:
            return OPERATOR
        tenant = self._tenant(headers)
        session = tenant.session
        if session is not None and session.source == "header":
            return tenant.in_session(_header_session(session, headers))
        return tenant

    def _tenant(self, headers: Mapping[str, str]) -> Tenant:
        if self._mode == "passthrough":
            return self._passthrough_tenant(headers)
        token = bearer_token(headers)
        if not token:
            raise ProxyError(
                ErrorCode.invalid_api_key,
                "You didn't provide an API key. Send a ctxproxy key of your tenant as "
                "'Authorization: Bearer <key>' (or 'x-api-key: <key>').",
            )
        tenant = self._by_key.get(token)
        if tenant is None:
            raise ProxyError(
                ErrorCode.invalid_api_key,
                "Incorrect API key provided. Use a ctxproxy key configured for your tenant.",
            )
        return Tenant(
            tenant.name,
            tenant.policy,
            tenant.name,
            tenant.upstream_key,
            False,
            tenant.session,
            tuple(tenant.routes),
        )

    @property
    def remembered(self) -> int:
        """How many passthrough credentials have their tenant remembered."""
        return len(self._seen)

    def _passthrough_tenant(self, headers: Mapping[str, str]) -> Tenant:
        presented = _presented(headers)
        tenant = self._seen.get(presented)
        if tenant is None:
            credential = client_credential(headers)
            tenant = self._scoped_by(credential)
            if credential is not None:  # an anonymous scope serves one request only
                self._remember(presented, tenant)
        return tenant

    def _scoped_by(self, credential: str | None) -> Tenant:
        # Artifacts are scoped by a hash of the client's own credentials: two clients never share
        # artifacts. A client without any gets a scope of its own for this one request.
        t = self._passthrough
        if credential is None:
            scope = f"{t.name}:anonymous:{secrets.token_hex(16)}"
        else:
            scope = f"{t.name}:{hashlib.sha256(credential.encode()).hexdigest()[:16]}"
        anonymous = credential is None
        return Tenant(
            t.name, t.policy, scope, t.upstream_key, True, t.session, tuple(t.routes), anonymous
        )

    def _remember(self, presented: tuple[tuple[str, ...], ...], tenant: Tenant) -> None:
        if self._seen and len(self._seen) >= self._memo_size:
            del self._seen[next(iter(self._seen))]  # the oldest first
        self._seen[presented] = tenant


def _presented(headers: Mapping[str, str]) -> tuple[tuple[str, ...], ...]:
    """The credential headers exactly as they came (each value, repeats included): the same
    presented credentials always resolve to the same tenant."""
    getall = getattr(headers, "getall", None)
    if getall is None:
        return tuple(tuple(_values(headers, name)) for name in CREDENTIAL_HEADERS)
    authorization, x_api_key, api_key = CREDENTIAL_HEADERS  # unrolled: on every request
    return (
        tuple(getall(authorization, ())),
        tuple(getall(x_api_key, ())),
        tuple(getall(api_key, ())),
    )
