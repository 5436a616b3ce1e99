"""`GET /v1/context/artifacts/{id}`: the read tool's page for operators, tenant-scoped."""

from __future__ import annotations

import contextlib
from typing import Any

import aiohttp
import pytest
from synthetic_harness import BIG, UNKNOWN_ID, SyntheticProxies, conversation

from proxy.artifacts.store import Artifact, StoreUnavailable
from proxy.synthetic.read import read_result

KEYS = {
    "auth": {"mode": "keys"},
    "tenants": [
        {"name": "acme", "keys": ["sk-acme"], "policy": "small"},
        {"name": "globex", "keys": ["sk-globex"], "policy": "small"},
    ],
}


async def request(
    method: str, url: str, key: str | None = "sk-acme", body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, json=body, headers=headers) as response,
    ):
        return response.status, await response.json(content_type=None)


async def offload(base_url: str, key: str = "sk-acme") -> str:
    """Prepare (dry run) the big conversation: its tool result is stored; returns the id."""
    status, prepared = await request("POST", f"{base_url}/context/prepare", key, conversation())
    assert status == 200
    [action] = prepared["manifest"]["actions"]
    assert action["step"] == "offload_tool_results"
    [artifact_id] = action["artifact_ids"]
    return str(artifact_id)


async def test_reads_a_page_like_the_read_tool(proxies: SyntheticProxies) -> None:
    proxy = await proxies.start(**KEYS)
    artifact_id = await offload(proxy.base_url)
    url = f"{proxy.base_url}/context/artifacts/{artifact_id}"
    status, page = await request("GET", f"{url}?offset=10&max_chars=50")
    assert status == 200
    artifact = Artifact(artifact_id, BIG, "tool_result", {}, 0.0)
    assert page == read_result(artifact, 10, 50)
    assert page["content"] == BIG[10:60] and page["next_offset"] == 60
    status, whole = await request("GET", url)
    assert status == 200 and whole["content"] == BIG[:20_000] and whole["next_offset"] is None
    status, capped = await request("GET", f"{url}?max_chars=999999")
    assert status == 200 and capped["content"] == BIG[:20_000]
    status, past = await request("GET", f"{url}?offset={len(BIG) + 5}")
    assert status == 200 and past["content"] == "" and past["next_offset"] is None
    status, far = await request("GET", f"{url}?offset={'9' * 15}")
    assert status == 200 and far["content"] == "" and far["next_offset"] is None


@pytest.mark.parametrize(
    "query",
    [
        "offset=-1",
        "offset=abc",
        "max_chars=0",
        "max_chars=1.5",
        "offset=%EF%BC%91",
        "offset=" + "9" * 4300,
        "max_chars=" + "1" * 5000,
        "offset=" + "9" * 16,
    ],
)
async def test_bad_query_is_400(proxies: SyntheticProxies, query: str) -> None:
    proxy = await proxies.start(**KEYS)
    artifact_id = await offload(proxy.base_url)
    status, body = await request("GET", f"{proxy.base_url}/context/artifacts/{artifact_id}?{query}")
    assert status == 400
    assert body["error"]["code"] == "invalid_request"
    assert body["error"]["param"] == query.split("=")[0]


async def test_unknown_and_foreign_ids_are_404(proxies: SyntheticProxies) -> None:
    proxy = await proxies.start(**KEYS)
    artifact_id = await offload(proxy.base_url, "sk-acme")
    for key, target in [
        ("sk-acme", UNKNOWN_ID),
        ("sk-acme", "not-an-id"),
        ("sk-globex", artifact_id),
    ]:
        status, body = await request("GET", f"{proxy.base_url}/context/artifacts/{target}", key)
        assert status == 404, (key, target)
        assert body["error"]["code"] == "artifact_not_found"
    status, body = await request("GET", f"{proxy.base_url}/context/artifacts/{artifact_id}", None)
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    status, _ = await request("GET", f"{proxy.base_url}/context/artifacts/{artifact_id}")
    assert status == 200


async def test_store_down_is_503(proxies: SyntheticProxies) -> None:
    class DownStore:
        async def get(self, scope: str, artifact_id: str) -> Artifact | None:
            raise StoreUnavailable("connection refused")

        def lease(self) -> contextlib.AbstractContextManager[None]:
            return contextlib.nullcontext()

    proxy = await proxies.start(**KEYS)
    real, proxy.services.store = proxy.services.store, DownStore()
    try:
        status, body = await request("GET", f"{proxy.base_url}/context/artifacts/{UNKNOWN_ID}")
    finally:
        proxy.services.store = real
    assert status == 503
    assert body["error"]["code"] == "artifact_store_unavailable"


async def test_a_result_sent_as_content_parts_reads_back_with_its_layout(
    proxies: SyntheticProxies,
) -> None:
    """Issue 11.11: part boundaries and `cache_control` survive the store (memory and Redis):
    the joined text plus `content_parts` rebuild the client's list exactly."""
    proxy = await proxies.start(**KEYS)
    cut = len(BIG) // 3
    parts = [
        {"type": "text", "text": BIG[:cut]},
        {"text": BIG[cut:], "type": "text", "cache_control": {"type": "ephemeral"}, "x": None},
    ]
    body = conversation()
    body["messages"][2]["content"] = parts
    status, prepared = await request("POST", f"{proxy.base_url}/context/prepare", body=body)
    assert status == 200
    [action] = prepared["manifest"]["actions"]
    [artifact_id] = action["artifact_ids"]
    status, page = await request("GET", f"{proxy.base_url}/context/artifacts/{artifact_id}")
    assert status == 200 and page["content"] == BIG and page["next_offset"] is None
    layout = page["content_parts"]
    assert layout == [
        {"span": [0, cut], "part": {"type": "text", "text": None}},
        {
            "span": [cut, len(BIG)],
            "part": {
                "text": None,
                "type": "text",
                "cache_control": {"type": "ephemeral"},
                "x": None,
            },
        },
    ]
    rebuilt = [
        {**entry["part"], "text": page["content"][slice(*entry["span"])]} for entry in layout
    ]
    assert rebuilt == parts
    # a result sent as a plain string has no layout (the same text would share the artifact:
    # its id is that of the text, and the first write's layout stays)
    body["messages"][2]["content"] = BIG + "\nend"
    status, prepared = await request("POST", f"{proxy.base_url}/context/prepare", body=body)
    [plain] = prepared["manifest"]["actions"][0]["artifact_ids"]
    status, page = await request("GET", f"{proxy.base_url}/context/artifacts/{plain}")
    assert status == 200 and page["content"] == BIG + "\nend" and "content_parts" not in page
