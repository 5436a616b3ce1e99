"""Who is calling: proxy API keys -> tenant (policy, upstream credentials, artifact scope)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from proxy.errors import ErrorCode, ProxyError
from proxy.settings import Settings, TenantSettings, UpstreamSettings

_SEEN_KEYS = 10_000


@dataclass(frozen=True)
class Tenant:
    name: str
    policy: str
    scope: str
    upstream_key: str | None
    passthrough: bool
    """True when the client's own Authorization is meant for the upstream."""

    def upstream_authorization(self, upstream: UpstreamSettings) -> str | None:
        """Header value to send upstream; None keeps the client's, "" sends none."""
        key = self.upstream_key or upstream.api_key
        if key:
            return f"Bearer {key}"
        return None if self.passthrough else ""


def bearer_token(headers: Mapping[str, str]) -> str | None:
    value = headers.get("Authorization")
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    return headers.get("api-key") or None


class TenantResolver:
    def __init__(self, settings: Settings) -> None:
        self._mode = settings.auth.mode
        self._by_key = {key: t for t in settings.tenants for key in t.keys}
        self._seen: dict[str, Tenant] = {}  # client key -> its tenant, bounded by _SEEN_KEYS
        self._passthrough = next(
            (t for t in settings.tenants if t.name == settings.auth.passthrough_tenant),
            TenantSettings(name=settings.auth.passthrough_tenant),
        )

    def resolve(self, headers: Mapping[str, str]) -> Tenant:
        token = bearer_token(headers)
        if self._mode == "passthrough":
            return self._passthrough_tenant(token)
        tenant = self._by_key.get(token) if token else None
        if tenant is None:
            raise ProxyError(
                ErrorCode.invalid_api_key,
                "Incorrect API key provided. Use a ctxproxy key configured for your tenant.",
            )
        return Tenant(tenant.name, tenant.policy, tenant.name, tenant.upstream_key, False)

    def _passthrough_tenant(self, token: str | None) -> Tenant:
        # Artifacts are scoped by a hash of the client's own key: two keys never share artifacts.
        key = token or ""
        tenant = self._seen.get(key)
        if tenant is None:
            key_hash = hashlib.sha256(key.encode()).hexdigest()[:16]
            t = self._passthrough
            tenant = Tenant(t.name, t.policy, f"{t.name}:{key_hash}", t.upstream_key, True)
            if len(self._seen) >= _SEEN_KEYS:
                self._seen.clear()
            self._seen[key] = tenant
        return tenant
