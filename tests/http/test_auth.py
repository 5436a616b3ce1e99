from __future__ import annotations

import pytest
from multidict import CIMultiDict

from proxy.errors import ErrorCode, ProxyError
from proxy.http.auth import TenantResolver, session_digest, session_of
from proxy.settings import SESSION_SCOPE_MARK, Settings, UpstreamSettings

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


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({}, "didn't provide an API key"),
        ({"Authorization": "Bearer "}, "didn't provide an API key"),
        ({"Authorization": "Bearer nope"}, "Incorrect API key provided"),
        ({"x-api-key": "nope"}, "Incorrect API key provided"),
    ],
)
def test_keys_mode_tells_a_missing_key_from_a_wrong_one(headers: dict[str, str], says: str) -> None:
    resolver = TenantResolver(
        settings(auth={"mode": "keys"}, tenants=[{"name": "acme", "keys": ["k1"]}])
    )
    with pytest.raises(ProxyError) as caught:
        resolver.resolve(headers)
    assert caught.value.code is ErrorCode.invalid_api_key
    assert says in caught.value.message


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
    scopes = {
        resolver.resolve(headers).scope
        for headers in (
            {},
            {},
            {"Authorization": ""},
            {"Authorization": "Bearer "},
            {"x-api-key": ""},
            {"Authorization": "Basic"},
        )
    }
    assert len(scopes) == 6


def test_one_key_has_one_scope_whichever_header_carries_it() -> None:
    resolver = TenantResolver(settings())
    scopes = {
        resolver.resolve(headers).scope
        for headers in (
            {"Authorization": "Bearer sk-k"},
            {"x-api-key": "sk-k"},
            {"api-key": "sk-k"},
        )
    }
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


# -- issue 12 item 9: sessions within a tenant --------------------------------------------------

KEYS_WITH_SESSIONS = {
    "auth": {"mode": "keys"},
    "tenants": [
        {"name": "acme", "keys": ["k1"], "session": {}},
        {"name": "beta", "keys": ["k2"], "session": {}},
        {"name": "plain", "keys": ["k3"]},
    ],
}


def test_a_session_header_scopes_within_the_tenant() -> None:
    resolver = TenantResolver(settings(**KEYS_WITH_SESSIONS))
    tenant = resolver.resolve({"Authorization": "Bearer k1"})
    one = resolver.resolve({"Authorization": "Bearer k1", "x-ctxproxy-session": "one"})
    two = resolver.resolve({"Authorization": "Bearer k1", "X-Ctxproxy-Session": "two"})
    assert tenant.scope == "acme"  # without the header: today's tenant scope
    assert len({tenant.scope, one.scope, two.scope}) == 3
    assert one.scope.startswith("acme#session:") and "one" not in one.scope
    assert resolver.resolve({"Authorization": "Bearer k1", "x-ctxproxy-session": "one"}) == one
    assert (one.name, one.policy) == (tenant.name, tenant.policy)


def test_the_same_session_value_in_two_tenants_is_two_scopes() -> None:
    resolver = TenantResolver(settings(**KEYS_WITH_SESSIONS))
    acme = resolver.resolve({"Authorization": "Bearer k1", "x-ctxproxy-session": "s"})
    beta = resolver.resolve({"Authorization": "Bearer k2", "x-ctxproxy-session": "s"})
    assert acme.scope != beta.scope and beta.scope.startswith("beta#session:")
    # a session value can name no other tenant's scope, nor another session's
    forged = resolver.resolve({"Authorization": "Bearer k1", "x-ctxproxy-session": beta.scope})
    assert forged.scope.startswith("acme#session:") and forged.scope != beta.scope


def test_tenants_without_sessions_ignore_the_header() -> None:
    resolver = TenantResolver(settings(**KEYS_WITH_SESSIONS))
    plain = resolver.resolve({"Authorization": "Bearer k3", "x-ctxproxy-session": "one"})
    assert plain.scope == "plain"


def test_passthrough_sessions_are_within_the_credentials_scope() -> None:
    resolver = TenantResolver(settings(tenants=[{"name": "default", "session": {}}]))
    mine = resolver.resolve({"Authorization": "Bearer sk-a"})
    mine_s = resolver.resolve({"Authorization": "Bearer sk-a", "x-ctxproxy-session": "s"})
    theirs_s = resolver.resolve({"Authorization": "Bearer sk-b", "x-ctxproxy-session": "s"})
    assert mine_s.scope.startswith(mine.scope + "#session:")
    assert theirs_s.scope != mine_s.scope
    assert resolver.resolve({"Authorization": "Bearer sk-a"}) is mine  # the memo stays per key


@pytest.mark.parametrize(
    ("session", "body", "named"),
    [
        ({"source": "user"}, {"user": "u-1"}, "u-1"),
        ({"source": "user"}, {"user": 7}, None),
        ({"source": "metadata"}, {"metadata": {"session_id": "m-1"}}, "m-1"),
        ({"source": "metadata", "metadata_key": "conv"}, {"metadata": {"conv": "c"}}, "c"),
        ({"source": "metadata"}, {"metadata": "session_id"}, None),
        ({"source": "metadata"}, {"user": "u-1"}, None),
        ({"source": "header"}, {"user": "u-1"}, None),
    ],
)
def test_body_sessions(session: dict[str, str], body: dict[str, object], named: str | None) -> None:
    resolver = TenantResolver(
        settings(
            auth={"mode": "keys"}, tenants=[{"name": "acme", "keys": ["k1"], "session": session}]
        )
    )
    tenant = resolver.resolve({"Authorization": "Bearer k1", "x-ctxproxy-session": "h"})
    if session["source"] == "header":
        assert tenant.in_body_session(body) is tenant and tenant.scope != "acme"
        return
    assert tenant.scope == "acme"  # a body source ignores the header
    expected = tenant.in_session(named).scope if named else "acme"
    assert tenant.in_body_session(body).scope == expected
    if named:
        assert expected != "acme"
        assert tenant.in_query_session({"session": named}).scope == expected
    assert tenant.in_query_session({}).scope == "acme"


def test_keys_mode_accepts_the_proxy_key_as_x_api_key() -> None:
    resolver = TenantResolver(
        settings(auth={"mode": "keys"}, tenants=[{"name": "acme", "keys": ["k1"]}])
    )
    assert resolver.resolve(CIMultiDict({"X-Api-Key": "k1"})).name == "acme"
    with pytest.raises(ProxyError):
        resolver.resolve(CIMultiDict({"x-api-key": "k2"}))


@pytest.mark.parametrize("mode", ["keys", "passthrough"])
def test_an_operator_key_is_the_operator_on_operator_routes_only(mode: str) -> None:
    resolver = TenantResolver(
        settings(
            auth={"mode": mode, "operator_keys": ["sk-op"]},
            tenants=[{"name": "acme", "keys": ["k1"]}],
        )
    )
    assert resolver.has_operators
    operator = resolver.resolve({"Authorization": "Bearer sk-op"}, operator_route=True)
    assert operator.operator and operator.scope == ""
    tenant = resolver.resolve({"Authorization": "Bearer k1"}, operator_route=True)
    assert not tenant.operator
    if mode == "keys":
        with pytest.raises(ProxyError) as raised:
            resolver.resolve({"Authorization": "Bearer sk-op"})
        assert raised.value.code is ErrorCode.invalid_api_key
    else:  # a client credential like any other, scoped by its hash
        client = resolver.resolve({"Authorization": "Bearer sk-op"})
        assert not client.operator and client.scope.startswith("default:")


def test_without_operator_keys_nobody_is_the_operator() -> None:
    resolver = TenantResolver(settings())
    assert not resolver.has_operators
    assert not resolver.resolve({"Authorization": "Bearer x"}, operator_route=True).operator


def test_the_owner_scope_and_the_session_digest() -> None:
    resolver = TenantResolver(
        settings(
            auth={"mode": "keys"},
            tenants=[{"name": "acme", "keys": ["k1"], "session": {"source": "header"}}],
        )
    )
    tenant = resolver.resolve({"Authorization": "Bearer k1", "x-ctxproxy-session": "s1"})
    assert tenant.scope == f"acme{SESSION_SCOPE_MARK}{session_digest('s1')}"
    assert tenant.owner_scope == "acme" and session_of(tenant.scope) == session_digest("s1")
    assert session_of("acme") is None and len(session_digest("s1")) == 32


@pytest.mark.parametrize(
    ("operator_keys", "problem"),
    [(["k1"], "auth.operator_keys.0: is also tenants.0.keys.0"), ([""], "empty key")],
)
def test_operator_keys_must_differ_from_tenant_keys(
    operator_keys: list[str], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        settings(
            auth={"mode": "keys", "operator_keys": operator_keys},
            tenants=[{"name": "acme", "keys": ["k1"]}],
        )
