"""Request records through the real server: the bodies a policy opts into, the list's filters
and pages, the bounded count."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakes import FakeUpstream
from records_harness import get, listed, post
from synthetic_harness import SyntheticProxies, conversation

CHAT = "/v1/chat/completions"
SESSION_HEADER = "x-ctxproxy-session"


def keys(policy: str = "small", **server: Any) -> dict[str, Any]:
    tenant = {"name": "acme", "keys": ["sk-acme"], "policy": policy,
              "session": {"source": "header", "header": SESSION_HEADER}}  # fmt: skip
    return {"auth": {"mode": "keys"}, "tenants": [tenant], "server": server}


def hello(text: str = "Hello", model: str = "gpt-4o") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize(
    ("records", "kept"),
    [
        ("{bodies: true}", "kept"),
        ("{bodies: false}", "off"),
        ("{bodies: true, max_body_bytes: 64}", "too_large"),
    ],
)
async def test_bodies_only_when_the_policy_opts_in(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, records: str, kept: str
) -> None:
    policy = f"extends: small\nrecords: {records}\n"
    proxy = await proxies.start(policies={"bodies": policy}, **keys("bodies"))
    sent = conversation()
    status, request_id, _ = await post(proxy, CHAT, sent)
    assert status == 200
    status, record = await get(proxy, f"requests/{request_id}")
    assert status == 200 and record["bodies"] == kept
    if kept == "kept":
        assert record["original"] == sent
        assert record["prepared"] == json.loads(fake_upstream.last.body)
        assert record["prepared"] != sent  # its tool result was offloaded
    else:
        assert record["original"] is None and record["prepared"] is None
    status, page = await get(proxy, "requests")
    assert "original" not in page["data"][0] and "manifest" not in page["data"][0]


async def test_filters_by_model_session_and_status(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**keys())
    _, first, _ = await post(proxy, CHAT, hello(), **{SESSION_HEADER: "alpha"})
    _, second, _ = await post(proxy, CHAT, hello(model="gpt-4o-mini"), **{SESSION_HEADER: "beta"})
    _, third, _ = await post(proxy, CHAT, hello())
    refused = hello("word " * 20_000)
    _, fourth, _ = await post(proxy, CHAT, refused, **{SESSION_HEADER: "alpha"})
    assert await listed(proxy) == [fourth, third, second, first]
    assert await listed(proxy, "session=alpha") == [fourth, first]
    assert await listed(proxy, "session=beta") == [second]
    assert await listed(proxy, "session=gamma") == []
    assert await listed(proxy, "model=gpt-4o-mini") == [second]
    assert await listed(proxy, "status=200&session=alpha") == [first]
    assert await listed(proxy, "outcome=refused") == [fourth]
    _, page = await get(proxy, "requests?session=alpha")
    assert page["data"][0]["session"] == page["data"][1]["session"] != "alpha"
    _, page = await get(proxy, "requests")
    assert page["data"][1]["session"] is None


async def test_pages_with_before(proxies: SyntheticProxies, fake_upstream: FakeUpstream) -> None:
    proxy = await proxies.start(**keys())
    sent = [(await post(proxy, CHAT, hello(f"Hello {n}")))[1] for n in range(5)]
    newest = sent[::-1]
    _, page = await get(proxy, "requests?limit=2")
    assert [r["request_id"] for r in page["data"]] == newest[:2] and page["has_more"] is True
    _, page = await get(proxy, f"requests?limit=2&before={newest[1]}")
    assert [r["request_id"] for r in page["data"]] == newest[2:4] and page["has_more"] is True
    _, page = await get(proxy, f"requests?limit=2&before={newest[3]}")
    assert [r["request_id"] for r in page["data"]] == newest[4:] and page["has_more"] is False
    status, body = await get(proxy, f"requests?before={'0' * 32}")
    assert status == 404 and body["error"]["code"] == "record_not_found"
    assert body["error"]["param"] == "before"


@pytest.mark.parametrize(
    "query",
    ["limit=0", "limit=201", "limit=x", "status=abc", "status=99", "outcome=great", "before=nope"],
)
async def test_a_bad_query_is_400(proxies: SyntheticProxies, query: str) -> None:
    proxy = await proxies.start(**keys())
    status, body = await get(proxy, f"requests?{query}")
    assert status == 400 and body["error"]["code"] == "invalid_request"
    assert body["error"]["param"] == query.partition("=")[0]


async def test_keeps_at_most_max_records(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**keys(records={"max_records": 3}))
    sent = [(await post(proxy, CHAT, hello(f"Hello {n}")))[1] for n in range(5)]
    assert await listed(proxy) == sent[:1:-1]
    status, _ = await get(proxy, f"requests/{sent[0]}")
    assert status == 404


async def test_records_off(proxies: SyntheticProxies, fake_upstream: FakeUpstream) -> None:
    proxy = await proxies.start(**keys(records={"enabled": False}))
    status, _, _ = await post(proxy, CHAT, hello())
    assert status == 200 and proxy.services.recorder is None
    status, body = await get(proxy, "requests")
    assert status == 404 and "records are off" in body["error"]["message"]
