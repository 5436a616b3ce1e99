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
budget: {context_window: 6000, reserved_output: 1000, safety_margin: 0, trigger: 0.95}
steps:
  - {kind: offload_tool_results, threshold_chars: 3000}
  - {kind: clear_tool_results, keep_recent_exchanges: 2}
  - {kind: summarize, roll_up_after: 0, roll_up_turns: 0, summarizer: {max_summary_tokens: 400}}
"""
LAGGING = COMPACT.replace("roll_up_after: 0, roll_up_turns: 0", "roll_up_after: 2")
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
    quoted = re.findall(r"^> - \[(call_[0-9_]+)\] (.+)$", summary["content"], re.MULTILINE)
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


async def _spans(proxy: RunningProxy, item: dict[str, Any]) -> list[Any]:
    """The items archived by the artifact the proxy's `item` names first."""
    archive_id = ARTIFACT.findall(item["content"])[0]
    return [loads(line) for line in (await _artifact(proxy, archive_id)).split("\n")]


async def test_turns_dropped_after_the_summary_wait_behind_a_short_item_until_it_rolls_up(
    lagging_proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    grown: list[Any] = agent_history(12, result_chars=1200)
    summary: dict[str, Any] | None = None
    tails: set[str] = set()
    for i in range(12, 80):
        grown = _turn(grown, i)
        status, _ = await _chat(lagging_proxy, grown)
        assert status == 200
        sent = fake_upstream.last.json()["messages"]
        assert parse_conversation(sent).problems == ()
        if summary is not None and sent[2] != summary:
            break  # rolled up
        has_tail = len(sent) > 3 and "later turn(s)" in str(sent[3]["content"])
        if not has_tail:
            continue
        if summary is None:
            summary = sent[2]
            assert summary == _summary(sent)
        assert sent[2] == summary  # the prefix through the summary is byte-identical
        tails.add(sent[3]["content"])
        # the two archives hold the dropped span in order, and the rest follows untouched
        first, later = await _spans(lagging_proxy, sent[2]), await _spans(lagging_proxy, sent[3])
        assert [*first, *later] == grown[2 : 2 + len(first) + len(later)]
        assert sent[4:] == grown[2 + len(first) + len(later) :]
    else:
        raise AssertionError("the summary never rolled up")
    assert len(tails) > 1, "no cut moved the tail before the roll-up"
    rolled = await _spans(lagging_proxy, _summary(sent))
    assert rolled[: len(first) + len(later)] == [*first, *later]  # it took the tail in
