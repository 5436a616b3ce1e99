"""Request records through the real server: every completion's record, read back per tenant."""

from __future__ import annotations

from fakes import FakeUpstream, completion, error_reply, make_usage, openai_error
from records_harness import KEYS, get, listed, post
from synthetic_harness import SyntheticProxies

CHAT = "/v1/chat/completions"


def hello(**extra: object) -> dict[str, object]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello"}], **extra}


async def test_a_chat_completion_is_recorded(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**KEYS)
    fake_upstream.enqueue(completion("Hi", usage=make_usage(120, 7)))
    status, request_id, _ = await post(proxy, CHAT, hello())
    assert status == 200
    status, page = await get(proxy, "requests")
    assert status == 200 and page["object"] == "list" and page["has_more"] is False
    [summary] = page["data"]
    assert summary["request_id"] == request_id
    assert summary["tenant"] == "acme" and summary["policy"] == "small"
    assert summary["route"] == CHAT and summary["format"] == "openai_chat"
    assert summary["model"] == "gpt-4o" and summary["stream"] is False
    assert summary["status"] == 200 and summary["outcome"] == "ok" and summary["reason"] is None
    assert summary["usage"]["input_tokens"] == 120 and summary["usage"]["output_tokens"] == 7
    assert summary["usage"]["cached_input_tokens"] == 0
    assert summary["tokens_before"] > 0 and summary["synthetic_rounds"] == 0
    status, record = await get(proxy, f"requests/{request_id}")
    assert status == 200
    assert {k: record[k] for k in summary} == summary
    assert record["manifest"]["model"] == "gpt-4o"
    assert record["headers"]["x-ctxproxy-request-id"] == request_id
    assert record["headers"]["x-ctxproxy-policy"] == "small"
    assert record["rounds"] == [] and record["bodies"] == "off"
    assert record["original"] is None and record["prepared"] is None


async def test_tenants_see_only_their_own_and_the_operator_sees_all(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**KEYS)
    fake_upstream.enqueue_many(completion("a"), completion("b"))
    _, acme_id, _ = await post(proxy, CHAT, hello(), key="sk-acme")
    _, globex_id, _ = await post(proxy, CHAT, hello(), key="sk-globex")
    assert await listed(proxy, key="sk-acme") == [acme_id]
    assert await listed(proxy, key="sk-globex") == [globex_id]
    assert set(await listed(proxy, key="sk-operator")) == {acme_id, globex_id}
    assert await listed(proxy, "tenant=globex", key="sk-operator") == [globex_id]
    assert await listed(proxy, "tenant=globex", key="sk-acme") == []
    status, body = await get(proxy, f"requests/{globex_id}", key="sk-acme")
    assert status == 404 and body["error"]["code"] == "record_not_found"
    status, record = await get(proxy, f"requests/{globex_id}", key="sk-operator")
    assert status == 200 and record["tenant"] == "globex"
    status, body = await get(proxy, "requests", key="sk-nobody")
    assert status == 401


async def test_an_operator_key_serves_no_completion(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**KEYS)
    status, _, body = await post(proxy, CHAT, hello(), key="sk-operator")
    assert status == 401 and b"invalid_api_key" in body
    assert fake_upstream.received == []


async def test_a_refusal_is_recorded_with_its_reason(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**KEYS)
    huge = {"model": "gpt-4o", "messages": [{"role": "user", "content": "word " * 20_000}]}
    status, request_id, _ = await post(proxy, CHAT, huge)
    assert status == 400 and fake_upstream.received == []
    status, record = await get(proxy, f"requests/{request_id}")
    assert status == 200
    assert record["status"] == 400 and record["outcome"] == "refused"
    assert record["reason"] == "protected_content_exceeds_allowance"
    assert record["error"]["code"] == "context_length_exceeded"
    assert record["error"]["details"]["final_tokens"] > 4000
    assert record["usage"] is None and record["upstream_ms"] is None
    assert await listed(proxy, "outcome=refused") == [request_id]
    assert await listed(proxy, "outcome=ok") == []
    assert await listed(proxy, "status=400") == [request_id]


async def test_an_upstream_error_is_recorded(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**KEYS)
    error = openai_error("The model does not exist", type="invalid_request_error")
    fake_upstream.enqueue(error_reply(404, error))
    status, request_id, _ = await post(proxy, CHAT, hello())
    assert status == 404
    [summary] = (await get(proxy, "requests?status=404"))[1]["data"]
    assert summary["request_id"] == request_id and summary["outcome"] == "upstream_error"
    assert summary["upstream_ms"] is not None and summary["reason"] is None


async def test_stats_sum_up_the_kept_records(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**KEYS)
    fake_upstream.enqueue_many(
        completion("a", usage=make_usage(100, 5)), completion("b", usage=make_usage(50, 5))
    )
    await post(proxy, CHAT, hello(), key="sk-acme")
    await post(proxy, CHAT, hello(), key="sk-acme")
    huge = {"model": "gpt-4o", "messages": [{"role": "user", "content": "word " * 20_000}]}
    await post(proxy, CHAT, huge, key="sk-acme")
    await post(proxy, CHAT, hello(), key="sk-globex")
    status, stats = await get(proxy, "stats", key="sk-acme")
    assert status == 200 and stats["object"] == "context.stats"
    [group] = stats["groups"]
    assert (group["tenant"], group["policy"], group["requests"]) == ("acme", "small", 3)
    assert group["input_tokens"] == 150 and group["cached_input_tokens"] == 0
    assert group["refusals"] == {"protected_content_exceeds_allowance": 1}
    assert len(group["series"]) == 3
    times = [point["time"] for point in group["series"]]
    assert times == sorted(times)
    status, stats = await get(proxy, "stats", key="sk-operator")
    assert [(g["tenant"], g["requests"]) for g in stats["groups"]] == [("acme", 3), ("globex", 1)]
    status, stats = await get(proxy, "stats?tenant=globex", key="sk-operator")
    assert [g["tenant"] for g in stats["groups"]] == ["globex"]


async def test_the_effective_policy(proxies: SyntheticProxies) -> None:
    proxy = await proxies.start(**KEYS)
    status, body = await get(proxy, "policy?model=gpt-4o")
    assert status == 200 and body["object"] == "context.policy"
    assert body["policy"] == "small" and body["model"] == "gpt-4o"
    assert body["effective"]["budget"]["context_window"] == 4000
    assert body["effective"]["records"] == {"bodies": False, "max_body_bytes": 2 * 1024 * 1024}
    status, body = await get(proxy, "policy?policy=default")
    assert status == 400 and body["error"]["param"] == "policy"
    status, body = await get(proxy, "policy?policy=default&model=gpt-4o", key="sk-operator")
    assert status == 200 and body["policy"] == "default"
    assert body["effective"]["budget"]["context_window"] == "auto"
    status, body = await get(proxy, "policy?policy=nope", key="sk-operator")
    assert status == 404


async def test_passthrough_credentials_see_only_their_own(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(auth={"mode": "passthrough", "operator_keys": ["sk-operator"]})
    _, one, _ = await post(proxy, CHAT, hello(), key="sk-client-one")
    _, two, _ = await post(proxy, CHAT, hello(), key="sk-client-two")
    assert await listed(proxy, key="sk-client-one") == [one]
    assert await listed(proxy, key="sk-client-two") == [two]
    assert await listed(proxy, key="sk-client-three") == []
    assert set(await listed(proxy, key="sk-operator")) == {one, two}
    status, _ = await get(proxy, f"requests/{two}", key="sk-client-one")
    assert status == 404
    status, _, _ = await post(proxy, CHAT, hello(), key="sk-operator")
    assert status == 200  # in passthrough mode it is a client credential like any other
    assert len(await listed(proxy, key="sk-operator")) == 3  # its own completion among them
