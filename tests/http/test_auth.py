from __future__ import annotations

import pytest
from multidict import CIMultiDict

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


CREDENTIALS = [
    ("Authorization", "Bearer sk-x", "Bearer sk-y"),
    ("Authorization", "Basic eDp4", "Basic eTp5"),
    ("Authorization", "Token abc", "Token abd"),
    ("x-api-key", "sk-ant-x", "sk-ant-y"),
    ("api-key", "azure-x", "azure-y"),
]


@pytest.mark.parametrize(("header", "mine", "theirs"), CREDENTIALS)
def test_passthrough_scopes_by_whatever_credential_was_presented(
    header: str, mine: str, theirs: str
) -> None:
    resolver = TenantResolver(settings())
    x = resolver.resolve({header: mine})
    y = resolver.resolve({header: theirs})
    assert x.scope != y.scope
    assert resolver.resolve({header: mine}).scope == x.scope  # stable for one credential
    assert mine.split()[-1] not in x.scope
    anonymous = resolver.resolve({})
    assert anonymous.scope not in (x.scope, y.scope)


def test_passthrough_scope_covers_every_credential_header() -> None:
    resolver = TenantResolver(settings())
    alone = resolver.resolve({"x-api-key": "sk-ant-x"})
    with_other = resolver.resolve({"x-api-key": "sk-ant-x", "Authorization": "Bearer public"})
    assert alone.scope != with_other.scope


def test_anonymous_requests_get_a_private_scope_each() -> None:
    resolver = TenantResolver(settings())
    scopes = {resolver.resolve(headers).scope for headers in (
        {}, {}, {"Authorization": ""}, {"Authorization": "Bearer "}, {"x-api-key": ""},
        {"Authorization": "Basic"})}
    assert len(scopes) == 6


def test_one_key_has_one_scope_whichever_header_carries_it() -> None:
    resolver = TenantResolver(settings())
    scopes = {resolver.resolve(headers).scope for headers in (
        {"Authorization": "Bearer sk-k"}, {"x-api-key": "sk-k"}, {"api-key": "sk-k"})}
    assert len(scopes) == 1
    basic = resolver.resolve({"Authorization": "Basic sk-k"}).scope
    assert basic not in scopes


def test_repeated_credential_headers_all_count() -> None:
    resolver = TenantResolver(settings())
    one = resolver.resolve(CIMultiDict([("x-api-key", "a")]))
    two = resolver.resolve(CIMultiDict([("x-api-key", "a"), ("X-Api-Key", "b")]))
    assert one.scope != two.scope


def test_passthrough_tenants_are_remembered_per_credential_and_bounded() -> None:
    resolver = TenantResolver(settings(), memo_size=3)
    headers = [CIMultiDict([("Authorization", f"Bearer sk-{i}")]) for i in range(5)]
    first = [resolver.resolve(h) for h in headers]
    assert resolver.remembered == 3
    again = [resolver.resolve(h) for h in headers]
    assert [t.scope for t in again] == [t.scope for t in first]  # forgetting changes nothing
    assert resolver.resolve(headers[4]) is again[4]  # remembered: the same tenant
    fresh = TenantResolver(settings())
    assert [fresh.resolve(h).scope for h in headers] == [t.scope for t in first]


def test_anonymous_requests_are_never_remembered() -> None:
    resolver = TenantResolver(settings())
    assert resolver.resolve(CIMultiDict()).scope != resolver.resolve(CIMultiDict()).scope
    assert resolver.resolve(CIMultiDict([("Authorization", "Bearer ")])).scope != (
        resolver.resolve(CIMultiDict([("Authorization", "Bearer ")])).scope
    )
    assert resolver.remembered == 0


def test_remembered_tenants_keep_repeated_headers_apart() -> None:
    resolver = TenantResolver(settings())
    one = resolver.resolve(CIMultiDict([("x-api-key", "a")]))
    two = resolver.resolve(CIMultiDict([("x-api-key", "a"), ("X-Api-Key", "b")]))
    assert resolver.resolve(CIMultiDict([("x-api-key", "a")])).scope == one.scope
    assert resolver.resolve(CIMultiDict([("x-api-key", "a"), ("x-api-key", "b")])) is two
