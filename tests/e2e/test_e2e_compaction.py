"""Compaction through the real server: `mode: compact` replaces the dropped turns by one summary
that names their archive and tool results, readable through the artifact endpoint, and the next
request with the same history sends the same bytes (memory store and Redis)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fakes import FakeUpstream
from pipeline_harness import agent_history, write_policy
from proxy_harness import RunningProxy, make_settings, start_proxy

from proxy.formats.openai_chat.conversation import parse_conversation
from proxy.jsonio import loads

COMPACT = """
mode: compact
budget: {context_window: 6000, reserved_output: 1000, safety_margin: 0}
steps:
  - {kind: offload_tool_results, threshold_chars: 3000}
  - {kind: clear_tool_results}
  - {kind: summarize, roll_up_after: 0, summarizer: {max_summary_tokens: 400}}
"""
LAGGING = COMPACT.replace("roll_up_after: 0", "roll_up_after: 2")
ARTIFACT = re.compile(r"art_[0-9a-f]{32}")
HEADERS = {"Authorization": "Bearer k"}


@pytest.fixture
async def compact_proxy(
    tmp_path: Path, fake_upstream: FakeUpstream, store_settings: dict[str, Any]
) -> AsyncIterator[RunningProxy]:
    write_policy(tmp_path, COMPACT, name="default")
    running = await start_proxy(
        make_settings(fake_upstream.base_url, policies_dir=str(tmp_path), store=store_settings)
    )
    yield running
    await running.stop()


@pytest.fixture
async def lagging_proxy(
    tmp_path: Path, fake_upstream: FakeUpstream, store_settings: dict[str, Any]
) -> AsyncIterator[RunningProxy]:
    write_policy(tmp_path, LAGGING, name="default")
    running = await start_proxy(
        make_settings(fake_upstream.base_url, policies_dir=str(tmp_path), store=store_settings)
    )
    yield running
    await running.stop()


async def _chat(proxy: RunningProxy, messages: list[Any]) -> tuple[int, dict[str, str]]:
    async with aiohttp.ClientSession() as session, session.post(
        f"{proxy.base_url}/chat/completions", headers=HEADERS,
        json={"model": "gpt-4o", "messages": messages},
    ) as response:
        await response.read()
        return response.status, dict(response.headers)


async def _artifact(proxy: RunningProxy, artifact_id: str) -> str:
    """The whole artifact, page by page, as the read tool would see it."""
    parts: list[str] = []
    offset: int | None = 0
    async with aiohttp.ClientSession() as session:
        while offset is not None:
            url = f"{proxy.base_url}/context/artifacts/{artifact_id}?offset={offset}"
            async with session.get(url, headers=HEADERS) as response:
                assert response.status == 200, await response.text()
                page = loads(await response.read())
            parts.append(page["content"])
            offset = page["next_offset"]
    return "".join(parts)


def _summary(messages: list[Any]) -> dict[str, Any]:
    [summary] = [
        m for m in messages
        if isinstance(m.get("content"), str) and "were compacted" in m["content"]
    ]
    return summary


async def test_the_summary_replaces_the_span_names_the_archive_and_is_reused(
    compact_proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    messages: list[Any] = agent_history(24, result_chars=1200)
    status, headers = await _chat(compact_proxy, messages)
    assert status == 200
    assert "summarize:" in headers["x-ctxproxy-actions"]
    assert headers["x-ctxproxy-summary"] == "extract:fresh"
    sent = fake_upstream.last.json()["messages"]
    assert parse_conversation(sent).problems == ()
    summary = _summary(sent)
    assert sent.index(summary) == 2  # after the system prompt and the task
    archive_id, *result_ids = ARTIFACT.findall(summary["content"])
    assert result_ids  # the tool results it covers, each by its own artifact
    archived = [loads(line) for line in (await _artifact(compact_proxy, archive_id)).split("\n")]
    assert archived == messages[2 : 2 + len(archived)]  # the span, as the client sent it
    assert sent[3:] == messages[2 + len(archived) :]  # the rest untouched
    results = {m["content"] for m in archived if m["role"] == "tool"}
    for result_id in result_ids:
        assert await _artifact(compact_proxy, result_id) in results
    # the digest carries the span's details: lines of its tool results, labelled by call
    by_call = {m["tool_call_id"]: m["content"] for m in archived if m["role"] == "tool"}
    quoted = re.findall(r"^- \[(call_[0-9_]+)\] (.+)$", summary["content"], re.MULTILINE)
    assert len(quoted) >= 3, summary["content"]
    assert all(line in by_call[call] for call, line in quoted)
    # the same history again: the same bytes upstream (the summary frozen under the span)
    first = fake_upstream.last.body
    status, headers = await _chat(compact_proxy, messages)
    assert status == 200 and fake_upstream.last.body == first
    assert headers["x-ctxproxy-summary"] == "extract:cache"  # frozen: the same bytes
    # one more turn that stays under the trigger: the old prompt is a prefix of the new one
    grown = [*messages, {"role": "assistant", "content": "Done."},
             {"role": "user", "content": "Thanks."}]
    status, _ = await _chat(compact_proxy, grown)
    assert status == 200
    assert fake_upstream.last.json()["messages"][: len(sent)] == sent


def _turn(messages: list[Any], i: int) -> list[Any]:
    """`messages` grown by turn `i` of `agent_history`'s shape (seed 1: new call ids)."""
    return [*messages, *agent_history(i + 1, result_chars=1200, seed=1)[-4:]]


async def test_turns_dropped_after_the_summary_wait_behind_a_short_item_until_it_rolls_up(
    lagging_proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    messages: list[Any] = agent_history(24, result_chars=1200)
    status, _ = await _chat(lagging_proxy, messages)
    assert status == 200
    sent = fake_upstream.last.json()["messages"]
    assert parse_conversation(sent).problems == ()
    summary, tail = sent[2], sent[3]
    assert summary == _summary(sent) and "later turn(s)" in tail["content"]
    # the two archives hold the dropped span in order, and the rest follows untouched
    summary_id = ARTIFACT.findall(summary["content"])[0]
    [tail_id] = ARTIFACT.findall(tail["content"])
    first = [loads(line) for line in (await _artifact(lagging_proxy, summary_id)).split("\n")]
    later = [loads(line) for line in (await _artifact(lagging_proxy, tail_id)).split("\n")]
    assert [*first, *later] == messages[2 : 2 + len(first) + len(later)]
    assert sent[4:] == messages[2 + len(first) + len(later) :]
    # turns arrive: each new cut moves the tail while the summary's bytes stay, until the
    # dropped turns behind the tail reach the roll-up and the summary takes them in
    grown, tails, rolled = messages, {tail["content"]}, None
    for i in range(24, 60):
        grown = _turn(grown, i)
        status, _ = await _chat(lagging_proxy, grown)
        assert status == 200
        now = fake_upstream.last.json()["messages"]
        assert parse_conversation(now).problems == ()
        if now[2] != summary:
            rolled = now
            break
        assert now[:3] == sent[:3]  # the prefix through the summary is byte-identical
        tails.add(now[3]["content"])
    assert len(tails) > 1, "no cut moved the tail before the roll-up"
    assert rolled is not None, "the summary never rolled up"
    new_id = ARTIFACT.findall(_summary(rolled)["content"])[0]
    archived = [loads(line) for line in (await _artifact(lagging_proxy, new_id)).split("\n")]
    assert archived[: len(first) + len(later)] == [*first, *later]  # it rolled the tail in
