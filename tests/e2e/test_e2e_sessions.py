"""Sessions within a tenant (issue 12 item 9), end to end on the memory store and on Redis: a
session's artifacts are readable in that session only, through `GET /v1/context/artifacts/{id}`
and through the read tool; requests without a session keep the tenant's scope."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fakes import FakeUpstream, completion
from pipeline_harness import write_policy
from proxy_harness import make_settings, start_proxy
from synthetic_harness import (
    BIG,
    SyntheticProxies,
    calling,
    conversation,
    read_call,
    small_policy,
    tool_results,
)

ACME_KEY = "sk-proxy-acme-Se55test"
GLOBEX_KEY = "sk-proxy-globex-Se66test"
SESSION_HEADER = "x-ctxproxy-session"


def keys_mode(session: dict[str, str]) -> dict[str, Any]:
    """Two tenants with sessions from the same source."""
    return {
        "auth": {"mode": "keys"},
        "tenants": [
            {"name": "acme", "keys": [ACME_KEY], "policy": "small", "session": session},
            {"name": "globex", "keys": [GLOBEX_KEY], "policy": "small", "session": session},
        ],
    }


async def call(
    method: str, url: str, key: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    sent = {"Authorization": f"Bearer {key}", **(headers or {})}
    async with (
        aiohttp.ClientSession() as client,
        client.request(method, url, json=body, headers=sent) as response,
    ):
        return response.status, await response.read()


async def offloaded_id(
    base_url: str, key: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> str:
    status, raw = await call("POST", f"{base_url}/context/prepare", key, body, headers)
    assert status == 200, raw
    [action] = json.loads(raw)["manifest"]["actions"]
    [artifact_id] = action["artifact_ids"]
    return str(artifact_id)


async def test_header_sessions_cannot_read_each_others_artifacts(
    proxies: SyntheticProxies,
) -> None:
    proxy = await proxies.start(**keys_mode({"source": "header"}))
    one = {SESSION_HEADER: "session-one"}
    two = {SESSION_HEADER: "session-two"}
    mine = await offloaded_id(proxy.base_url, ACME_KEY, conversation(), one)
    url = f"{proxy.base_url}/context/artifacts/{mine}"
    assert (await call("GET", url, ACME_KEY, headers=one))[0] == 200
    assert (await call("GET", url, ACME_KEY, headers=two))[0] == 404
    assert (await call("GET", url, ACME_KEY))[0] == 404  # the tenant's own scope is another
    assert (await call("GET", url, GLOBEX_KEY, headers=one))[0] == 404  # same value, other tenant
    theirs = await offloaded_id(proxy.base_url, ACME_KEY, conversation(), two)
    assert theirs != mine  # the same content has one id per session


async def test_without_a_session_the_tenant_scope_is_kept(proxies: SyntheticProxies) -> None:
    proxy = await proxies.start(**keys_mode({"source": "header"}))
    tenant_wide = await offloaded_id(proxy.base_url, ACME_KEY, conversation())
    url = f"{proxy.base_url}/context/artifacts/{tenant_wide}"
    assert (await call("GET", url, ACME_KEY))[0] == 200
    assert (await call("GET", url, ACME_KEY, headers={SESSION_HEADER: "s"}))[0] == 404
    assert (await call("GET", url, GLOBEX_KEY))[0] == 404


@pytest.mark.parametrize(
    ("session", "in_body"),
    [
        ({"source": "user"}, lambda value: {"user": value}),
        (
            {"source": "metadata", "metadata_key": "conversation"},
            lambda value: {"metadata": {"conversation": value}},
        ),
    ],
    ids=["user", "metadata"],
)
async def test_body_sessions_read_back_with_the_session_query(
    proxies: SyntheticProxies, session: dict[str, str], in_body: Any
) -> None:
    proxy = await proxies.start(**keys_mode(session))
    mine = await offloaded_id(proxy.base_url, ACME_KEY, conversation(**in_body("alice")))
    url = f"{proxy.base_url}/context/artifacts/{mine}"
    assert (await call("GET", f"{url}?session=alice", ACME_KEY))[0] == 200
    assert (await call("GET", f"{url}?session=bob", ACME_KEY))[0] == 404
    assert (await call("GET", url, ACME_KEY))[0] == 404
    assert (await call("GET", url, ACME_KEY, headers={SESSION_HEADER: "alice"}))[0] == 404
    assert (await call("GET", f"{url}?session=alice", GLOBEX_KEY))[0] == 404
    bobs = await offloaded_id(proxy.base_url, ACME_KEY, conversation(**in_body("bob")))
    assert bobs != mine


async def test_the_read_tool_reads_in_the_requests_session(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**keys_mode({"source": "header"}))
    one = {SESSION_HEADER: "one"}
    mine = await offloaded_id(proxy.base_url, ACME_KEY, conversation(), one)
    chat = proxy.base_url + "/chat/completions"
    for headers, readable in ((one, True), ({SESSION_HEADER: "two"}, False)):
        fake_upstream.enqueue_many(calling(read_call(0, 40, mine)), completion("done"))
        status, raw = await call("POST", chat, ACME_KEY, conversation(), headers)
        assert status == 200, raw
        [result] = tool_results(fake_upstream.last)
        if readable:
            assert result["content"] == BIG[:40]
        else:
            assert result["error"]["code"] == "artifact_not_found"
        assert SESSION_HEADER not in {name.lower() for name in fake_upstream.last.headers}


async def test_passthrough_sessions_stay_within_the_clients_credentials(
    proxies: SyntheticProxies,
) -> None:
    proxy = await proxies.start(tenants=[{"name": "default", "policy": "small", "session": {}}])
    one = {SESSION_HEADER: "one"}
    mine = await offloaded_id(proxy.base_url, "sk-client-a-Se77test", conversation(), one)
    url = f"{proxy.base_url}/context/artifacts/{mine}"
    assert (await call("GET", url, "sk-client-a-Se77test", headers=one))[0] == 200
    assert (await call("GET", url, "sk-client-b-Se88test", headers=one))[0] == 404
    assert (await call("GET", url, "sk-client-a-Se77test"))[0] == 404


async def test_each_session_has_its_own_per_scope_cap(
    fake_upstream: FakeUpstream, tmp_path: Path, store_settings: dict[str, Any]
) -> None:
    """`artifacts.max_per_scope: 1`: a session that stores two artifacts evicts its own older one,
    never another session's."""
    write_policy(tmp_path, small_policy() + "artifacts: {max_per_scope: 1}\n", name="capped")
    tenants = [{"name": "acme", "keys": [ACME_KEY], "policy": "capped", "session": {}}]
    proxy = await start_proxy(
        make_settings(
            fake_upstream.base_url,
            policies_dir=str(tmp_path),
            store=store_settings,
            auth={"mode": "keys"},
            tenants=tenants,
        )
    )
    try:
        one, two = {SESSION_HEADER: "one"}, {SESSION_HEADER: "two"}
        kept = await offloaded_id(proxy.base_url, ACME_KEY, conversation(), one)
        first = await offloaded_id(proxy.base_url, ACME_KEY, conversation(), two)
        other = conversation()
        other["messages"][2]["content"] = BIG.replace("value", "other")
        await offloaded_id(proxy.base_url, ACME_KEY, other, two)
        artifacts = f"{proxy.base_url}/context/artifacts"
        assert (await call("GET", f"{artifacts}/{first}", ACME_KEY, headers=two))[0] == 404
        assert (await call("GET", f"{artifacts}/{kept}", ACME_KEY, headers=one))[0] == 200
    finally:
        await proxy.stop()
