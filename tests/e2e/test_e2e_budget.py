"""The budget through the real server: refusing only what the provider would refuse, windows
learned from vLLM- and llama.cpp-style upstreams, notes, and one retry after an overflow error."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import pytest
from fakes import FakeUpstream, completion, error_reply, json_reply, make_usage
from pipeline_harness import agent_history
from proxy_harness import RunningProxy, make_settings, start_proxy
from shared_tokens import counter_for

CHAT = "/v1/chat/completions"
OVERFLOW_8192 = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 20000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


def history(turns: int, result_chars: int) -> list[dict[str, Any]]:
    """`agent_history` with each tool result on one line: nothing for `condense_tool_results`
    to collapse, so a request under the window goes upstream as it was sent."""
    messages = agent_history(turns, result_chars=result_chars)
    for message in messages:
        if message["role"] == "tool":
            message["content"] = message["content"].replace("\n", " ")
    return messages


def client(proxy: RunningProxy) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proxy.base_url, api_key="k", max_retries=0)


def gpt_4_prompt(tokens: int) -> list[dict[str, Any]]:
    """One user message; the request counts exactly `tokens` tokens for gpt-4."""
    counter = counter_for("gpt-4")
    words = tokens
    while True:
        messages = [{"role": "user", "content": "word " * words}]
        if counter.count_request({"model": "gpt-4", "messages": messages}) <= tokens:
            break
        words -= 1
    assert counter.count_request({"model": "gpt-4", "messages": messages}) == tokens
    return messages


async def dry_run(
    proxy: RunningProxy, body: dict[str, Any], key: str | None = None
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.base_url}/context/prepare", json=body, headers=headers) as response,
    ):
        assert response.status == 200
        manifest: dict[str, Any] = (await response.json())["manifest"]
        return manifest


async def test_gpt_4_without_max_tokens_is_forwarded_and_with_4096_refused(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    messages = gpt_4_prompt(4524)
    async with client(proxy) as sdk:
        reply = await sdk.chat.completions.create(model="gpt-4", messages=messages)  # type: ignore[arg-type]
        assert reply.choices[0].message.content
        assert fake_upstream.last.json()["messages"] == messages
        with pytest.raises(openai.BadRequestError) as caught:
            await sdk.chat.completions.create(
                model="gpt-4",
                messages=messages,  # type: ignore[arg-type]
                max_tokens=4096,
            )
    assert caught.value.code == "context_length_exceeded"
    assert len(fake_upstream.requests(CHAT)) == 1


async def test_an_unknown_model_says_its_window_is_the_fallback(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    async with client(proxy) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="my-secret-local-model", messages=[{"role": "user", "content": "hi"}]
        )
    assert raw.headers["x-ctxproxy-notes"] == "window_fallback,estimated_tokens"
    assert [r.path for r in fake_upstream.received] == ["/v1/models", "/props", CHAT]
    manifest = await dry_run(
        proxy, {"model": "my-secret-local-model", "messages": [{"role": "user", "content": "x"}]}
    )
    assert (manifest["context_window"], manifest["context_window_source"]) == (128_000, "fallback")
    assert len(fake_upstream.received) == 3  # the negative answer is remembered


async def test_an_unknown_model_behind_vllm_takes_max_model_len(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    listing = {"object": "list", "data": [{"id": "my-vllm", "max_model_len": 2048}]}
    fake_upstream.enqueue(json_reply(listing), path="/v1/models")
    async with client(proxy) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="my-vllm", messages=[{"role": "user", "content": "hi"}]
        )
        assert raw.headers["x-ctxproxy-notes"] == "window_upstream,estimated_tokens"
        with pytest.raises(openai.BadRequestError):  # a 2,048-token window is enforced
            await sdk.chat.completions.create(
                model="my-vllm",
                messages=[{"role": "user", "content": "lorem ipsum " * 2000}],
            )
    manifest = await dry_run(
        proxy, {"model": "my-vllm", "messages": [{"role": "user", "content": "x"}]}
    )
    assert (manifest["context_window"], manifest["context_window_source"]) == (2048, "upstream")
    assert [r.path for r in fake_upstream.received] == ["/v1/models", "/props", CHAT]


async def test_an_unknown_model_behind_llama_cpp_takes_n_ctx_from_props(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.enqueue(json_reply({"data": [{"id": "model.gguf"}]}), path="/v1/models")
    props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}
    fake_upstream.enqueue(json_reply(props), path="/props")
    manifest = await dry_run(
        proxy, {"model": "local", "messages": [{"role": "user", "content": "x"}]}
    )
    assert (manifest["context_window"], manifest["context_window_source"]) == (4096, "upstream")
    assert "context window 4096 taken from the upstream" in manifest["notes"]


async def test_an_overflow_error_leads_to_one_tighter_retry_that_succeeds(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    messages: list[Any] = history(12, result_chars=6000)  # ~20k tokens: fits gpt-4o's map
    fake_upstream.enqueue(error_reply(400, OVERFLOW_8192), path=CHAT)
    fake_upstream.enqueue(completion("fits now"), path=CHAT)
    async with client(proxy) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages)
        assert raw.parse().choices[0].message.content == "fits now"
        assert raw.headers["x-ctxproxy-notes"] == "window_corrected,retried_after_overflow"
        first, second = (r.json() for r in fake_upstream.requests(CHAT))
        counter = counter_for("gpt-4o")
        assert first["messages"] == messages
        assert counter.count_request(second) <= 8192 < counter.count_request(first)
        assert int(raw.headers["x-ctxproxy-tokens-after"]) == counter.count_request(second)
        # The corrected window is remembered: the next request is prepared against it at once.
        raw = await sdk.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages)
        assert raw.headers["x-ctxproxy-notes"] == "window_corrected"
    assert len(fake_upstream.requests(CHAT)) == 3
    assert counter.count_request(fake_upstream.last.json()) <= 8192


async def test_counts_are_calibrated_by_the_upstreams_usage(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    messages = [{"role": "user", "content": "lorem ipsum dolor " * 400}]
    body = {"model": "gpt-4o", "messages": messages}
    tokens = counter_for("gpt-4o").count_request(body)
    # The ratio applies from the third answer on, one step of at most 0.1 per answer: 5 answers.
    for _ in range(5):
        fake_upstream.enqueue(completion("ok", usage=make_usage(int(tokens * 1.5), 1)), path=CHAT)
    async with client(proxy) as sdk:
        for _ in range(5):
            await sdk.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    manifest = await dry_run(proxy, body, key="k")  # the same credential: its own ratio
    assert manifest["count_ratio"] == pytest.approx(1.5, abs=0.01)
    assert manifest["count_ratio_source"] == "own"
    assert "counts_calibrated" in manifest["note_codes"]
    other = await dry_run(proxy, body, key="another-key")  # one credential is no agreement
    assert (other["count_ratio"], other["count_ratio_source"]) == (1.0, "none")
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{proxy.url}/metrics") as response,
    ):
        text = await response.text()
    [line] = [x for x in text.splitlines() if x.startswith("ctxproxy_count_ratio{")]
    label, value = line.split()
    assert label == 'ctxproxy_count_ratio{model="gpt-4o",upstream="fake"}'
    assert float(value) == 1.0  # the agreed ratio: one credential's own is not shown


async def test_replicas_on_one_redis_share_the_calibrated_ratio(
    fake_upstream: FakeUpstream, redis_store_settings: dict[str, Any]
) -> None:
    store = {**redis_store_settings, "calibration_sync_s": 0.05}
    measuring = await start_proxy(make_settings(fake_upstream.base_url, store=store))
    other = await start_proxy(make_settings(fake_upstream.base_url, store=store))
    try:
        messages = [{"role": "user", "content": "lorem ipsum dolor " * 400}]
        body = {"model": "gpt-4o", "messages": messages}
        tokens = counter_for("gpt-4o").count_request(body)
        assert (await dry_run(other, body, key="k"))["count_ratio"] == 1.0  # nothing measured yet
        usage = make_usage(int(tokens * 1.4), 1)
        for _ in range(4):  # one step of at most 0.1 per answer
            fake_upstream.enqueue(completion("ok", usage=usage), path=CHAT)
        async with client(measuring) as sdk:
            for _ in range(4):
                await sdk.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
        for _ in range(600):  # a few sync intervals of both replicas (30 s: a hang)
            manifest = await dry_run(other, body, key="k")  # the same credential, other replica
            if manifest["count_ratio"] == pytest.approx(1.4, abs=0.01):
                break
            await asyncio.sleep(0.05)
        assert manifest["count_ratio"] == pytest.approx(1.4, abs=0.01)
        assert manifest["count_ratio_source"] == "own"
        assert "counts_calibrated" in manifest["note_codes"]
        assert len(fake_upstream.requests(CHAT)) == 4  # `other` never called the upstream
    finally:
        await measuring.stop()
        await other.stop()


async def test_an_overflow_stating_the_prompts_size_retries_with_the_upstreams_count(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    """The window was right but the upstream counts this conversation higher than the proxy
    (a calibration that lags): the error's own prompt size sets the retry's count ratio, so the
    retry is cut to fit instead of the same body being refused again."""
    counter = counter_for("gpt-4")
    turns = 1
    while counter.count_request({"messages": history(turns + 1, result_chars=1500)}) < 7000:
        turns += 1
    messages: list[Any] = history(turns, result_chars=1500)
    counted = counter.count_request({"model": "gpt-4", "messages": messages})
    assert 6000 < counted < 7000  # under gpt-4's 8,192 less 100 for the answer: sent unchanged
    stated = int(counted * 1.25)
    overflow = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            f"messages resulted in {stated} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    fake_upstream.enqueue(error_reply(400, overflow), path=CHAT)
    fake_upstream.enqueue(completion("fits now"), path=CHAT)
    async with client(proxy) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="gpt-4", messages=messages, max_tokens=100
        )
    assert raw.parse().choices[0].message.content == "fits now"
    assert "retried_after_overflow" in raw.headers["x-ctxproxy-notes"]
    first, second = (r.json() for r in fake_upstream.requests(CHAT))
    assert first["messages"] == messages
    # counted as the upstream counts (x 1.25 and a 1% cushion), the retry fits its window
    assert counter.count_request(second) * 1.25 * 1.01 <= 8192 - 100
