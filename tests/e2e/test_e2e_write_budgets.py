"""Per-scope write budgets through the real server, on the memory store and on Redis (security
round two, "per-scope write budgets"): a tenant over its budget gets its content kept in the
prompt (note `store_write_budget`), or a typed `context_length_exceeded` refusal when it cannot
fit without being stored; every id the upstream sees was stored; another tenant still offloads;
/metrics counts the refused writes."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
from fakes import FakeUpstream, completion
from prometheus_client.parser import text_string_to_metric_families
from proxy_harness import RunningProxy
from synthetic_harness import BIG, SyntheticProxies

GREEDY_KEY = "sk-proxy-greedy-Wb1test"
MODEST_KEY = "sk-proxy-modest-Wb2test"
ARTIFACT = re.compile(r"art_[0-9a-f]{32}")
RESULT_CHARS = 2_500  # over the offload threshold (2,000), three fit the small window
LEAN = (
    "extends: small\n"
    "steps: [{kind: offload_tool_results, threshold_chars: 2000, preview_head_chars: 200,\n"
    "         preview_tail_chars: 100}, {kind: clear_tool_results}, {kind: drop_turns}]\n"
)
"""The small policy with short previews: one result's offload saves more than the read tools
cost (never worse: with the default 2,000 characters of preview it would not, and the result
would stay whole)."""


def two_tenants() -> dict[str, Any]:
    """`greedy` may hold two results' worth of artifacts (and its requests' cut records),
    `modest` the default budget."""
    return {
        "auth": {"mode": "keys"},
        "server": {"metrics_auth": "none"},
        "tenants": [
            {
                "name": "greedy",
                "keys": [GREEDY_KEY],
                "policy": "lean",
                # two results, and the cuts each request keeps (a few hundred bytes)
                "write_budget": {"max_live_bytes": 2 * RESULT_CHARS + 2_000},
                "session": {"source": "header"},
            },
            {"name": "modest", "keys": [MODEST_KEY], "policy": "lean"},
        ],
        "policies": {"lean": LEAN},
    }


def history(*results: str) -> dict[str, Any]:
    """A task, then one tool exchange per result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Audit these files."}]
    for i, result in enumerate(results):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "read", "arguments": "{}"},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": result},
        ]
    return {"model": "gpt-4o", "messages": messages}


def result(name: str, chars: int = RESULT_CHARS) -> str:
    return "".join(f"{name} line {n}: ok\n" for n in range(chars)).ljust(chars)[:chars]


async def call(
    proxy: RunningProxy, method: str, path: str, key: str, body: Any = None, session: str = ""
) -> tuple[int, dict[str, str], bytes]:
    headers = {"Authorization": f"Bearer {key}"}
    if session:
        headers["x-ctxproxy-session"] = session
    async with (
        aiohttp.ClientSession() as client,
        client.request(method, proxy.base_url + path, json=body, headers=headers) as response,
    ):
        return response.status, dict(response.headers), await response.read()


def sent_results(fake: FakeUpstream) -> list[str]:
    return [m["content"] for m in fake.last.json()["messages"] if m["role"] == "tool"]


async def metric(proxy: RunningProxy, name: str, **labels: str) -> float:
    async with aiohttp.ClientSession() as client, client.get(proxy.url + "/metrics") as answer:
        text = await answer.text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


async def test_a_tenant_over_its_budget_keeps_its_content_and_others_still_offload(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**two_tenants())
    results = [result(name) for name in ("alpha", "beta", "gamma")]
    fake_upstream.enqueue(completion("done"))
    status, headers, raw = await call(proxy, "POST", "/chat/completions", GREEDY_KEY,
                                      history(*results))  # fmt: skip
    assert status == 200, raw
    assert headers["x-ctxproxy-notes"] == "store_write_budget"
    sent = sent_results(fake_upstream)
    assert [bool(ARTIFACT.search(t)) for t in sent] == [True, True, False]
    assert sent[2] == results[2]  # the third result went upstream whole
    for text in sent[:2]:  # and each id shown reads back
        [artifact_id] = set(ARTIFACT.findall(text))
        got = await call(proxy, "GET", f"/context/artifacts/{artifact_id}", GREEDY_KEY)
        assert got[0] == 200

    fake_upstream.enqueue(completion("done"))
    status, headers, raw = await call(proxy, "POST", "/chat/completions", MODEST_KEY,
                                      history(*results))  # fmt: skip
    assert status == 200, raw
    assert "x-ctxproxy-notes" not in headers
    assert all(ARTIFACT.search(t) for t in sent_results(fake_upstream))

    writes = await metric(proxy, "ctxproxy_store_writes_refused_total", reason="live_bytes")
    assert writes == 1
    assert await metric(proxy, "ctxproxy_store_bytes_refused_total", reason="live_bytes") == len(
        results[2]
    )


async def test_a_request_that_cannot_fit_unstored_gets_a_typed_refusal(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**two_tenants())
    status, _, raw = await call(proxy, "POST", "/chat/completions", GREEDY_KEY, history(BIG))
    assert status == 400, raw
    error = json.loads(raw)["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["ctxproxy"]["reason"] == "store_write_budget"
    assert "write budget is used up" in error["message"]
    assert fake_upstream.requests() == []  # refused before any upstream call
    refusals = await metric(proxy, "ctxproxy_refusals_total", reason="store_write_budget")
    assert refusals == 1

    fake_upstream.enqueue(completion("done"))
    status, _, raw = await call(proxy, "POST", "/chat/completions", MODEST_KEY, history(BIG))
    assert status == 200, raw
    assert ARTIFACT.search(sent_results(fake_upstream)[0])


async def test_new_sessions_draw_on_the_same_budget(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**two_tenants())
    for n, session in enumerate(("one", "two", "three")):
        fake_upstream.enqueue(completion("done"))
        body = history(result(f"session {session}"))
        status, headers, raw = await call(
            proxy, "POST", "/chat/completions", GREEDY_KEY, body, session=session
        )
        assert status == 200, raw
        offloaded = bool(ARTIFACT.search(sent_results(fake_upstream)[0]))
        assert offloaded == (n < 2), f"session {session}"
        assert (headers.get("x-ctxproxy-notes") == "store_write_budget") == (n >= 2)
