from __future__ import annotations

import pytest

from proxy.errors import ErrorCode, ProxyError
from proxy.http.auth import TenantResolver
from proxy.settings import Settings, UpstreamSettings

UPSTREAM = {"name": "u", "base_url": "http://127.0.0.1:9/v1"}


def settings(**data: object) -> Settings:
    return Settings.model_validate({"upstreams": [UPSTREAM], **data})


def test_passthrough_keeps_client_key_and_scopes_by_its_hash() -> None:
    resolver = TenantResolver(settings())
    a = resolver.resolve({"Authorization": "Bearer sk-a"})
    b = resolver.resolve({"Authorization": "Bearer sk-b"})
    assert a.name == b.name == "default" and a.policy == "default"
    assert a.scope != b.scope and "sk-a" not in a.scope
    assert a.upstream_authorization(UpstreamSettings(**UPSTREAM)) is None


def test_keys_mode_maps_keys_to_tenants() -> None:
    resolver = TenantResolver(
        settings(
            auth={"mode": "keys"},
            tenants=[
                {"name": "acme", "keys": ["k1"], "policy": "p", "upstream_key": "up"},
                {"name": "beta", "keys": ["k2"]},
            ],
        )
    )
    acme = resolver.resolve({"Authorization": "Bearer k1"})
    assert (acme.name, acme.policy, acme.scope) == ("acme", "p", "acme")
    assert acme.upstream_authorization(UpstreamSettings(**UPSTREAM)) == "Bearer up"
    beta = resolver.resolve({"api-key": "k2"})
    assert beta.name == "beta"
    # no upstream key anywhere: the proxy key is never forwarded upstream
    assert beta.upstream_authorization(UpstreamSettings(**UPSTREAM)) == ""
    with_key = UpstreamSettings(**UPSTREAM, api_key="shared")
    assert beta.upstream_authorization(with_key) == "Bearer shared"


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic k1"}]
)
def test_keys_mode_rejects_unknown_keys(headers: dict[str, str]) -> None:
    resolver = TenantResolver(
        settings(auth={"mode": "keys"}, tenants=[{"name": "acme", "keys": ["k1"]}])
    )
    with pytest.raises(ProxyError) as caught:
        resolver.resolve(headers)
    assert caught.value.code is ErrorCode.invalid_api_key
    assert "k1" not in caught.value.message and "nope" not in caught.value.message
