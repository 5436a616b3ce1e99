"""Security properties end to end: auth on every route, tenant isolation, unguessable ids, no keys
in logs or bodies, upstream URLs from config only, untrusted framing, and the /metrics scrape."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import aiohttp
import pytest
import redis.asyncio
from fakes import FakeUpstream, completion, error_reply
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio.cluster import RedisCluster
from synthetic_harness import (
    BIG,
    READ,
    SEARCH,
    UNKNOWN_ID,
    SyntheticProxies,
    call_spec,
    calling,
    conversation,
    read_call,
    tool_results,
)

from proxy.artifacts.store import compute_artifact_id, is_artifact_id
from proxy.logs import JsonFormatter

CHAT = "/v1/chat/completions"
ACME_KEY = "sk-proxy-acme-Zq81xW4kTtest"
GLOBEX_KEY = "sk-proxy-globex-Hm27pR9dTtest"
ACME_UPSTREAM = "sk-upstream-acme-Vb63nL5cTtest"
CLIENT_KEY = "sk-client-passthrough-Kd94sJ2fTtest"
WRONG_KEY = "sk-wrong-key-Pf38yB6gTtest"
SECRETS = (ACME_KEY, GLOBEX_KEY, ACME_UPSTREAM, CLIENT_KEY, WRONG_KEY)
KEYS: dict[str, Any] = {
    "auth": {"mode": "keys"},
    "tenants": [
        {"name": "acme", "keys": [ACME_KEY], "policy": "small", "upstream_key": ACME_UPSTREAM},
        {"name": "globex", "keys": [GLOBEX_KEY], "policy": "small"},
    ],
}
ID_FORMAT = re.compile(r"art_[0-9a-f]{32}\Z")
OTHER = "\n".join(f"globex secret row {i}: {i * 31}" for i in range(700))
REFUSED = {"model": "gpt-4o", "messages": [{"role": "user", "content": "word " * 6000}]}


async def call(
    method: str,
    url: str,
    key: str | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    sent = dict(headers or {})
    if key:
        sent["Authorization"] = f"Bearer {key}"
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, json=body, headers=sent) as response,
    ):
        return response.status, dict(response.headers), await response.read()


async def prepared_ids(base_url: str, key: str | None, body: dict[str, Any]) -> list[str]:
    status, _, raw = await call("POST", f"{base_url}/context/prepare", key, body)
    assert status == 200, raw
    manifest = json.loads(raw)["manifest"]
    return [aid for action in manifest["actions"] for aid in action["artifact_ids"]]


def with_tool_output(text: str) -> dict[str, Any]:
    body = conversation()
    body["messages"][2]["content"] = text
    return body


# -- auth on every route ----------------------------------------------------------------------

ROUTES = [
    ("POST", CHAT, {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}),
    (
        "POST",
        "/v1/context/prepare",
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]},
    ),
    ("GET", f"/v1/context/artifacts/{UNKNOWN_ID}", None),
    ("GET", "/v1/models", None),
    ("DELETE", "/v1/files/file-1", None),
    ("POST", "/v1/embeddings", {"model": "text-embedding-3-small", "input": "x"}),
    ("GET", "/nope", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
async def test_keys_mode_every_route_needs_a_proxy_key(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, method: str, path: str, body: Any
) -> None:
    proxy = await proxies.start(**KEYS)
    attempts: list[dict[str, str]] = [
        {},
        {"Authorization": f"Bearer {WRONG_KEY}"},
        {"Authorization": f"Bearer {ACME_UPSTREAM}"},
        {"Authorization": ACME_KEY},
        {"Authorization": f"Basic {ACME_KEY}"},
        {"api-key": WRONG_KEY},
        {"Authorization": "Bearer "},
    ]
    for headers in attempts:
        status, _, raw = await call(method, proxy.url + path, None, body, headers)
        assert status == 401, (headers, raw)
        error = json.loads(raw)["error"]
        assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
    assert fake_upstream.received == []


async def test_keys_mode_open_routes_and_valid_key(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**KEYS)
    for path in ("/healthz", "/readyz"):
        status, _, _ = await call("GET", proxy.url + path)
        assert status == 200, path
    for method, path, body in ROUTES[:2] + ROUTES[3:6]:
        status, _, raw = await call(method, proxy.url + path, ACME_KEY, body)
        assert status == 200, (path, raw)
    assert {r.headers["Authorization"] for r in fake_upstream.received} == {
        f"Bearer {ACME_UPSTREAM}"
    }


@pytest.mark.parametrize(
    ("metrics_auth", "open_without_key"), [(None, False), ("keys", False), ("none", True)]
)
async def test_keys_mode_metrics_need_a_proxy_key_unless_opened(
    proxies: SyntheticProxies, metrics_auth: str | None, open_without_key: bool
) -> None:
    # Issue 11 item 11: /metrics was open and its labels list the tenants.
    server = {} if metrics_auth is None else {"server": {"metrics_auth": metrics_auth}}
    proxy = await proxies.start(**KEYS, **server)
    status, _, raw = await call("GET", proxy.url + "/metrics", headers={"X-Probe": "1"})
    if open_without_key:
        assert status == 200 and b"ctxproxy_requests_total" in raw
    else:
        assert status == 401 and json.loads(raw)["error"]["code"] == "invalid_api_key"
        assert b"acme" not in raw and b"globex" not in raw
        assert (await call("GET", proxy.url + "/metrics", WRONG_KEY))[0] == 401
    assert (await call("GET", proxy.url + "/metrics", ACME_KEY))[0] == 200
    status, _, raw = await call("GET", proxy.url + "/metrics", ACME_KEY)
    assert status == 200
    scraper = b'route="/metrics",status="200",tenant="acme"'
    assert (scraper in raw) is not open_without_key  # the key names who scraped


async def test_passthrough_metrics_stay_open_by_default(proxies: SyntheticProxies) -> None:
    proxy = await proxies.start()
    assert (await call("GET", proxy.url + "/metrics"))[0] == 200


# -- tenant isolation -------------------------------------------------------------------------


async def test_tenant_cannot_read_another_tenants_artifacts(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**KEYS)
    [theirs] = await prepared_ids(proxy.base_url, GLOBEX_KEY, with_tool_output(OTHER))
    [mine] = await prepared_ids(proxy.base_url, ACME_KEY, conversation())
    [same_content] = await prepared_ids(proxy.base_url, GLOBEX_KEY, conversation())
    assert len({theirs, mine, same_content}) == 3  # the same content has one id per tenant
    pages = {}
    for aid in (theirs, UNKNOWN_ID, same_content):
        status, _, raw = await call("GET", f"{proxy.base_url}/context/artifacts/{aid}", ACME_KEY)
        error = json.loads(raw)["error"]
        error.pop("ctxproxy")
        pages[aid] = (status, json.dumps(error).replace(aid, "ID"))
    assert pages[theirs] == pages[UNKNOWN_ID] == pages[same_content]
    assert pages[theirs][0] == 404
    status, _, _ = await call("GET", f"{proxy.base_url}/context/artifacts/{mine}", ACME_KEY)
    assert status == 200

    def search(aid: str) -> Any:
        return lambda _: call_spec(SEARCH, {"artifact_id": aid, "pattern": "secret row"})

    fake_upstream.enqueue_many(
        calling(
            read_call(0, 500, theirs),
            search(theirs),
            read_call(0, 500, UNKNOWN_ID),
            search(UNKNOWN_ID),
            read_call(0, 40),
            search(same_content),
        ),
        completion("done"),
    )
    status, _, raw = await call(
        "POST", proxy.base_url + "/chat/completions", ACME_KEY, conversation()
    )
    assert status == 200, raw
    read_b, search_b, read_x, search_x, own, search_same = tool_results(fake_upstream.last)
    assert json.dumps(read_b).replace(theirs, "ID") == json.dumps(read_x).replace(UNKNOWN_ID, "ID")
    assert json.dumps(search_b).replace(theirs, "ID") == json.dumps(search_x).replace(
        UNKNOWN_ID, "ID"
    )
    assert read_b["error"]["code"] == search_b["error"]["code"] == "artifact_not_found"
    assert search_same["error"]["code"] == "artifact_not_found"
    assert own["content"] == BIG[:40]
    assert all(b"globex secret row 1: 31" not in r.body for r in fake_upstream.requests(CHAT))


async def test_passthrough_scopes_by_client_key(proxies: SyntheticProxies) -> None:
    proxy = await proxies.start()
    [a] = await prepared_ids(proxy.base_url, "sk-client-one-aaaaaaaa", conversation())
    [b] = await prepared_ids(proxy.base_url, "sk-client-two-bbbbbbbb", conversation())
    assert a != b
    url = f"{proxy.base_url}/context/artifacts/{a}"
    assert (await call("GET", url, "sk-client-two-bbbbbbbb"))[0] == 404
    assert (await call("GET", url, None))[0] == 404
    assert (await call("GET", url, "sk-client-one-aaaaaaaa"))[0] == 200


CLIENT_CREDENTIALS = [
    ("Authorization", "Bearer sk-client-x-Wq41test", "Bearer sk-client-y-Er52test"),
    ("Authorization", "Basic dXNlci14OnB3LXg=", "Basic dXNlci15OnB3LXk="),
    ("x-api-key", "sk-ant-x-Ty63test", "sk-ant-y-Ui74test"),
    ("api-key", "azure-x-Op85test", "azure-y-As96test"),
]


async def prepared_with(base_url: str, headers: dict[str, str]) -> list[str]:
    status, _, raw = await call(
        "POST", f"{base_url}/context/prepare", None, conversation(), headers
    )
    assert status == 200, raw
    manifest = json.loads(raw)["manifest"]
    return [aid for action in manifest["actions"] for aid in action["artifact_ids"]]


@pytest.mark.parametrize(("header", "mine", "theirs"), CLIENT_CREDENTIALS)
async def test_passthrough_scopes_every_kind_of_credential(
    proxies: SyntheticProxies, header: str, mine: str, theirs: str
) -> None:
    proxy = await proxies.start()
    [aid] = await prepared_with(proxy.base_url, {header: mine})
    url = f"{proxy.base_url}/context/artifacts/{aid}"
    assert (await call("GET", url, headers={header: theirs}))[0] == 404
    assert (await call("GET", url))[0] == 404
    for other_header, other_value, _ in CLIENT_CREDENTIALS:
        if other_header != header:
            assert (await call("GET", url, headers={other_header: other_value}))[0] == 404
    assert (await call("GET", url, headers={header: mine}))[0] == 200


async def test_a_request_without_a_credential_stores_nothing(
    proxies: SyntheticProxies, store_settings: dict[str, Any]
) -> None:
    """Its scope would be its own and die with it: whatever it stored could never be read back,
    and anyone who reaches the port could fill the store (an outside run wrote 39 MB with 60
    dry runs). Its tool result stays inline, the manifest says why, and no key is written."""
    proxy = await proxies.start()
    before = await store_keys(store_settings)
    fits = conversation()
    fits["messages"][2]["content"] = BIG[:3000]  # over the offload threshold, within the window
    for headers in ({}, {"Authorization": "Bearer "}, {"x-api-key": ""}):
        url = f"{proxy.base_url}/context/prepare"
        status, _, raw = await call("POST", url, None, fits, headers)
        assert status == 200, raw
        answer = json.loads(raw)
        assert not any(action["artifact_ids"] for action in answer["manifest"]["actions"])
        assert "no_credential" in answer["manifest"]["note_codes"]
        assert answer["body"]["messages"][2]["content"] == BIG[:3000]  # stayed where it was
        status, _, raw = await call("POST", url, None, conversation(), headers)
        error = json.loads(raw)["error"]  # too long as it is, and nothing can be stored for it
        assert (status, error["code"], error["ctxproxy"]["reason"]) == (
            400, "context_length_exceeded", "no_credential"
        )  # fmt: skip
        assert "send one" in error["message"]
    assert await store_keys(store_settings) == before
    [aid] = await prepared_with(proxy.base_url, {"Authorization": "Bearer sk-a-client"})
    assert is_artifact_id(aid)  # the same request with a credential is offloaded


async def store_keys(store: dict[str, Any]) -> int:
    """Keys under the test's own prefix in Redis; for the memory store, 0 (it has no keys to
    count from outside: the dry runs' manifests say nothing was stored)."""
    if store.get("kind") not in ("redis", "redis-cluster"):
        return 0
    client: redis.asyncio.Redis | RedisCluster = (
        RedisCluster.from_url(store["url"])
        if store["kind"] == "redis-cluster"
        else redis.asyncio.Redis.from_url(store["url"])
    )
    try:
        return len([key async for key in client.scan_iter(match=f"{store['key_prefix']}*")])
    finally:
        await client.aclose()


# -- unguessable ids --------------------------------------------------------------------------


async def test_artifact_ids_are_hmacs_of_the_server_secret(proxies: SyntheticProxies) -> None:
    first = await proxies.start(**KEYS)
    again = await proxies.start(**KEYS)
    other = await proxies.start(**KEYS, store=proxies.another_deployment("another-secret"))
    [aid] = await prepared_ids(first.base_url, ACME_KEY, conversation())
    assert ID_FORMAT.match(aid)  # art_ + 32 hex = 128 bits
    assert aid == compute_artifact_id(b"test-secret", "acme", BIG)
    assert aid != compute_artifact_id(b"test-secret", "globex", BIG)
    assert await prepared_ids(again.base_url, ACME_KEY, conversation()) == [aid]
    [other_id] = await prepared_ids(other.base_url, ACME_KEY, conversation())
    assert ID_FORMAT.match(other_id) and other_id != aid
    url = f"{other.base_url}/context/artifacts/{aid}"
    assert (await call("GET", url, ACME_KEY))[0] == 404


# -- keys never leak --------------------------------------------------------------------------


async def exercise(base_url: str, key: str, fake: FakeUpstream) -> list[bytes]:
    """Requests of every kind with `key`; returns every response's headers and body."""
    seen: list[bytes] = []

    async def note(method: str, path: str, body: Any = None, use: str | None = key) -> None:
        _, headers, raw = await call(method, base_url + path, use, body)
        seen.append(json.dumps(headers).encode() + raw)

    fake.enqueue_many(calling(read_call(0, 30)), completion("ok"))
    await note("POST", "/chat/completions", conversation())  # reduced + synthetic
    await note("POST", "/context/prepare", conversation())  # manifest
    await note("POST", "/context/prepare", REFUSED)  # refused dry run
    await note("POST", "/chat/completions", REFUSED)  # refused
    await note("POST", "/chat/completions", {"model": "gpt-4o"})  # failing request
    await note("GET", f"/context/artifacts/{UNKNOWN_ID}")  # 404
    fake.enqueue(error_reply(401))
    await note(
        "POST",
        "/chat/completions",
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]},
    )  # upstream error
    fake.enqueue(error_reply(500))
    await note("GET", "/models")  # upstream error
    await note("GET", "/models", use=WRONG_KEY)
    return seen


async def test_keys_never_appear_in_logs_manifests_or_errors(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    passthrough = await proxies.start()
    keyed = await proxies.start(**KEYS)
    seen = await exercise(passthrough.base_url, CLIENT_KEY, fake_upstream)
    seen += await exercise(keyed.base_url, ACME_KEY, fake_upstream)
    received = b"".join(bytes(json.dumps(dict(r.headers)), "utf-8") for r in fake_upstream.received)
    assert CLIENT_KEY.encode() in received and ACME_UPSTREAM.encode() in received  # were used
    assert ACME_KEY.encode() not in received
    formatter = JsonFormatter()
    logged = [caplog.text, *(formatter.format(r) for r in caplog.records)]
    assert any('"logger":"ctxproxy.access"' in line for line in logged)
    for secret in SECRETS:
        core = secret.split("-")[-1]
        for text in logged:
            assert core not in text, secret
        for body in seen:
            assert core.encode() not in body, secret
    assert not any("bearer" in text.lower() for text in logged)


# -- upstream URLs come from config only ------------------------------------------------------


async def raw_get(port: int, target: str, host: str = "127.0.0.1") -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    return int(data.split(b" ", 2)[1])


async def test_passthrough_paths_never_leave_the_configured_upstream(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    async with FakeUpstream() as evil:
        there = f"127.0.0.1:{evil.port}"
        targets = [
            "/v1/../../x",
            "/v1/%2e%2e/%2e%2e/x",
            "/v1/%252e%252e/%252e%252e/x",
            "/v1/%2E%2E%2F%2E%2E%2Fx",
            "/v1/a%2F..%2F..%2Fx",
            "/v1//evil.example/x",
            f"/v1//{there}/v1/models",
            f"/v1/http://{there}/v1/models",
            f"http://{there}/v1/models",
            "//evil.example/v1/models",
            f"/v1/%2f%2f{there}/v1/models",
            "/v1/@evil.example/x",
            "/v1/%5C..%5C..%5Cx",
            "/v1/models%3Fx=1%23y",
        ]
        for target in targets:
            before = len(fake_upstream.received)
            status = await raw_get(proxy.port, target, host=there)
            got = fake_upstream.received[before:]
            assert (status == 200 and len(got) == 1) or (400 <= status < 500 and not got), target
            for record in got:
                assert record.path.startswith("/v1/"), (target, record.path)
                assert ".." not in record.path.split("/"), (target, record.path)
                assert record.headers["Host"] == f"127.0.0.1:{fake_upstream.port}"
        assert evil.received == []
    status, _, _ = await call("GET", proxy.base_url + "/models", headers={"Host": there})
    assert status == 200 and fake_upstream.last.path == "/v1/models"


# -- untrusted framing ------------------------------------------------------------------------


async def test_stored_output_is_framed_as_untrusted(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    fake_upstream.enqueue_many(
        calling(
            read_call(0, 100),
            lambda aid: call_spec(SEARCH, {"artifact_id": aid, "pattern": "line 7"}),
        ),
        completion("ok"),
    )
    status, _, _ = await call("POST", proxy.base_url + "/chat/completions", "k", conversation())
    assert status == 200
    first, second = fake_upstream.requests(CHAT)
    header = first.json()["messages"][2]["content"].split("\n", 1)[0]
    assert header.startswith("[ctxproxy") and "untrusted" in header
    tools = {t["function"]["name"]: t["function"] for t in first.json()["tools"]}
    assert all("untrusted data" in tools[name]["description"] for name in (READ, SEARCH))
    read, found = tool_results(second)
    assert read["untrusted_content"] is True and found["untrusted_content"] is True


# -- metrics ----------------------------------------------------------------------------------


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_metrics_after_a_few_requests(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    assert (await call("GET", proxy.base_url + "/models", CLIENT_KEY))[0] == 200
    small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    assert (await call("POST", proxy.base_url + "/chat/completions", CLIENT_KEY, small))[0] == 200
    fake_upstream.enqueue_many(calling(read_call(0, 30)), completion("ok"))
    status, headers, _ = await call(
        "POST", proxy.base_url + "/chat/completions", CLIENT_KEY, conversation()
    )
    assert status == 200 and headers["x-ctxproxy-synthetic-rounds"] == "1"
    assert (await call("POST", proxy.base_url + "/chat/completions", CLIENT_KEY, REFUSED))[0] == 400
    assert (await call("GET", f"{proxy.url}/v1/files/file-{CLIENT_KEY}", CLIENT_KEY))[0] == 200
    status, headers, raw = await call("GET", proxy.url + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    text = raw.decode()
    assert CLIENT_KEY not in text and "file-" not in text  # no keys, no raw paths
    got = samples(text)

    def value(name: str, **labels: str) -> float:
        return got.get((name, frozenset(labels.items())), 0.0)

    who = {"tenant": "default", "policy": "small"}
    assert value("ctxproxy_requests_total", route="/v1/{tail}", status="200", **who) == 2
    assert value("ctxproxy_requests_total", route=CHAT, status="200", **who) == 2
    assert value("ctxproxy_requests_total", route=CHAT, status="400", **who) == 1
    assert value("ctxproxy_refusals_total", reason="protected_content_exceeds_allowance") == 1
    assert value("ctxproxy_preparations_total", policy="small", outcome="within_trigger") == 1
    assert value("ctxproxy_actions_total", step="offload_tool_results") == 1
    assert value("ctxproxy_tokens_freed_total", step="offload_tool_results") > 1000
    assert value("ctxproxy_tokens_before_preparation_count", policy="small") == 2
    before = value("ctxproxy_tokens_before_preparation_sum", policy="small")
    assert before > value("ctxproxy_tokens_after_preparation_sum", policy="small") + 1000
    assert value("ctxproxy_synthetic_rounds_total") == 1
    assert value("ctxproxy_artifact_reads_total", source="tool", outcome="found") == 1
    assert value("ctxproxy_upstream_latency_seconds_count", upstream="fake") == 5
    assert value("ctxproxy_proxy_overhead_seconds_count") == 4
    assert value("ctxproxy_request_duration_seconds_count", route=CHAT) == 3
    assert value("ctxproxy_store_errors_total") == 0
    assert ("ctxproxy_store_errors_total", frozenset()) in got
