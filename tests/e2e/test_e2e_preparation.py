"""Preparation through the real server: reduced requests upstream, typed refusals, dry run."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from fakes import FakeUpstream
from pipeline_harness import agent_history, write_policy
from proxy_harness import RunningProxy, make_settings, start_proxy
from shared_tokens import counter_for

from proxy.formats.openai_chat.conversation import parse_conversation

SMALL = """
budget: {context_window: 8000, reserved_output: 1000, safety_margin: 0}
steps:
  - {kind: offload_tool_results, threshold_chars: 3000}
  - {kind: clear_tool_results}
  - {kind: drop_turns}
"""

CLIENT = {"Authorization": "Bearer sk-test-client"}
"""A client's credential: nothing is stored for a request without one."""


@pytest.fixture
async def small_proxy(tmp_path: Path, fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    write_policy(tmp_path, SMALL, name="default")
    running = await start_proxy(make_settings(fake_upstream.base_url, policies_dir=str(tmp_path)))
    yield running
    await running.stop()


async def test_over_budget_history_reaches_upstream_within_budget(
    small_proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    messages: list[Any] = agent_history(30, result_chars=2500)
    async with openai.AsyncOpenAI(
        base_url=small_proxy.base_url, api_key="k", max_retries=0
    ) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=messages
        )
        reply = raw.parse()
    assert reply.choices[0].message.content == "echo: Next step 29, please."
    sent = fake_upstream.last.json()
    assert parse_conversation(sent["messages"]).problems == ()
    tokens = counter_for("gpt-4o").count_request(sent)
    assert tokens <= 7000
    assert int(raw.headers["x-ctxproxy-tokens-after"]) == tokens
    assert int(raw.headers["x-ctxproxy-tokens-before"]) > 7000
    assert raw.headers["x-ctxproxy-actions"] != "none"
    assert raw.headers["x-ctxproxy-request-id"]


async def test_refusal_is_a_bad_request_the_sdk_recognises(
    small_proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    messages = [{"role": "user", "content": "remember this: " + "lorem ipsum " * 5000}]
    async with openai.AsyncOpenAI(
        base_url=small_proxy.base_url, api_key="k", max_retries=0
    ) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    error = caught.value
    assert error.code == "context_length_exceeded"
    assert error.status_code == 400
    assert "maximum context length is" in error.message
    assert "context_length_exceeded" in error.message
    details = error.body["ctxproxy"]  # type: ignore[index]
    assert details["reason"] == "protected_content_exceeds_allowance"
    assert details["request_id"]
    assert fake_upstream.received == []


async def test_refusal_in_a_stream_request_comes_before_the_stream(
    small_proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    body = {
        "model": "gpt-4o",
        "stream": True,
        "messages": [{"role": "user", "content": "x " * 20000}],
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{small_proxy.base_url}/chat/completions", json=body, headers=CLIENT
        ) as response,
    ):
        assert response.status == 400
        assert response.content_type == "application/json"
        payload = await response.json()
    assert payload["error"]["code"] == "context_length_exceeded"
    assert fake_upstream.received == []


async def test_dry_run_shows_the_exact_upstream_body(
    small_proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    body = {"model": "gpt-4o", "messages": agent_history(30, result_chars=2500), "x_keep": 1}
    # one client key for both: artifact ids are per scope, and a request without any credential
    # has a private scope of its own (so its ids differ from any other request's)
    key = {"Authorization": "Bearer sk-client"}
    async with aiohttp.ClientSession(headers=key) as session:
        async with session.post(f"{small_proxy.base_url}/context/prepare", json=body) as response:
            assert response.status == 200
            dry = await response.json()
        async with session.post(f"{small_proxy.base_url}/chat/completions", json=body) as response:
            assert response.status == 200
    assert fake_upstream.received[-1].json() == dry["body"]
    assert len(fake_upstream.received) == 1  # the dry run never called upstream
    manifest = dry["manifest"]
    assert dry["changed"] is True and dry["body"]["x_keep"] == 1
    assert manifest["policy"] == "default" and manifest["outcome"].startswith("reduced")
    assert manifest["tokens_after"] <= manifest["allowance"] < manifest["tokens_before"]
    for action in manifest["actions"]:
        assert action["step"] and action["message_indices"] and action["artifact_ids"]


async def test_passthrough_mode_scopes_artifacts_by_client_key(
    small_proxy: RunningProxy,
) -> None:
    body = {"model": "gpt-4o", "messages": agent_history(30, result_chars=2500)}
    ids = []
    async with aiohttp.ClientSession() as session:
        for key in ("sk-one", "sk-two"):
            async with session.post(
                f"{small_proxy.base_url}/context/prepare",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
            ) as response:
                dry = await response.json()
            ids.append(set(dry["manifest"]["actions"][0]["artifact_ids"]))
    assert ids[0] and ids[1] and not ids[0] & ids[1]


async def test_actions_header_counts_dropped_turns_as_the_notice_does(
    small_proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    body = {"model": "gpt-4o", "messages": agent_history(60, result_chars=2500)}
    url = f"{small_proxy.base_url}/chat/completions"
    async with (
        aiohttp.ClientSession(headers=CLIENT) as session,
        session.post(url, json=body) as response,
    ):
        assert response.status == 200
        actions = dict(a.split(":") for a in response.headers["x-ctxproxy-actions"].split(","))
    notices = [
        m["content"]
        for m in fake_upstream.last.json()["messages"]
        if isinstance(m.get("content"), str) and "earlier turn(s)" in m["content"]
    ]
    assert len(notices) == 1
    turns = int(re.search(r"(\d+) earlier turn\(s\)", notices[0]).group(1))  # type: ignore[union-attr]
    assert turns > 1
    assert int(actions["drop_turns"]) == turns


async def test_a_109_kb_tool_result_is_offloaded_in_a_128k_window(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    """Issue 12.3: the default policy offloads every result over its threshold when seen, far
    under the trigger of gpt-4o's 128k window; the same history goes upstream as the same bytes."""
    messages: list[Any] = agent_history(2, result_chars=2000)
    big = agent_history(1, result_chars=109_000)[3]["content"]
    assert len(big) > 100_000
    messages[3]["content"] = big
    prose = "".join(f"Note {n}: the module reads its settings. " for n in range(50))
    messages[7]["content"] = prose  # nothing machine-made: condensing leaves it too
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
        for _ in range(2):
            raw = await client.chat.completions.with_raw_response.create(
                model="gpt-4o", messages=messages
            )
            assert raw.http_response.status_code == 200
    first, second = fake_upstream.received[-2:]
    assert first.body == second.body
    sent = first.json()
    offloaded = sent["messages"][3]
    assert {k: v for k, v in offloaded.items() if k != "content"} == {
        "role": "tool",
        "tool_call_id": messages[3]["tool_call_id"],
    }
    content = offloaded["content"]
    assert len(content) < 3000 and "offloaded as artifact art_" in content
    assert f"original {len(big)} chars" in content and f"stored {len(big)} chars" in content
    assert content.endswith(big[-500:]) and big[:1500] in content
    assert sent["messages"][7] == messages[7]  # a small result stays as it was
    tokens = int(raw.headers["x-ctxproxy-tokens-before"])
    assert 25_000 < tokens < 0.95 * 128_000  # under the trigger
    assert int(raw.headers["x-ctxproxy-tokens-after"]) < 3_000
    assert "offload_tool_results" in raw.headers["x-ctxproxy-actions"]
    assert [t["function"]["name"] for t in sent["tools"]] == [
        "read_context_artifact",
        "search_context_artifact",
    ]
