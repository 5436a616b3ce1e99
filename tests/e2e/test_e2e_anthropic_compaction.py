"""Compaction for a Claude-style client whose route is an `anthropic` upstream: the model
summarizer is asked in Anthropic Messages on that same upstream (with the client's credentials),
and its summary stands where the dropped turns were (the `anthropic` SDK against the proxy)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from fakes import FakeUpstream, Recorded
from fakes.anthropic import anthropic_message, default_anthropic_for, text_block
from fakes.replies import Reply
from proxy_harness import RunningProxy, make_settings, start_proxy

from proxy.engine.steps.summarize.summarizer import INSTRUCTIONS

MESSAGES = "/v1/messages"
POLICY = """
mode: compact
budget: {context_window: 6000, default_reserved_output: 500}
steps:
  - {kind: offload_tool_results, threshold_chars: 2000}
  - {kind: clear_tool_results}
  - kind: summarize
    roll_up_turns: 0
    roll_up_after: 0
    summarizer: {kind: llm, model: claude-sum, timeout_s: 60, precompute_at: null,
                 on_error: extract}
"""
SUMMARY = {
    "facts": [{"name": "the release", "value": "REL-4711"}],
    "decisions": ["ship on Friday"], "open_questions": [], "resources": [], "errors": [],
}


def answer(record: Recorded) -> Reply:
    """The summary to the summarizer's call, an echo to anything else."""
    body = record.json()
    if record.path == MESSAGES and body.get("system") == INSTRUCTIONS:
        return anthropic_message([text_block(json.dumps(SUMMARY))], model="claude-sum-01")
    return default_anthropic_for(record)


@pytest.fixture
async def claude(tmp_path: Path) -> AsyncIterator[tuple[FakeUpstream, RunningProxy]]:
    (tmp_path / "compact-claude.yaml").write_text(POLICY)
    async with FakeUpstream(default=answer) as fake:
        upstream = {"name": "claude", "kind": "anthropic", "base_url": fake.origin}
        proxy = await start_proxy(make_settings(
            fake.origin, upstreams=[upstream], policies_dir=str(tmp_path),
            tenants=[{"name": "default", "policy": "compact-claude"}],
        ))
        try:
            yield fake, proxy
        finally:
            await proxy.stop()


def conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        note = " ".join(f"reading {i}.{k} is {(i * 31 + k) % 97}." for k in range(60))
        messages += [{"role": "user", "content": f"Step {i}: {note}"},
                     {"role": "assistant", "content": f"Noted step {i}."}]
    return [*messages, {"role": "user", "content": "Which release?"}]


async def test_the_summary_of_a_claude_conversation_is_written_through_messages(
    claude: tuple[FakeUpstream, RunningProxy],
) -> None:
    fake, proxy = claude
    client = anthropic.AsyncAnthropic(base_url=proxy.url, api_key="sk-ant-client")
    try:
        raw = await client.messages.with_raw_response.create(
            model="claude-haiku-4-5", max_tokens=100, messages=conversation(30)
        )
        message = await raw.parse()
    finally:
        await client.close()
    assert message.content[0].type == "text"
    assert raw.headers["x-ctxproxy-summary"] == "llm:fresh"
    *summarizer, forwarded = fake.requests(MESSAGES)
    assert summarizer  # one call per batch of the dropped turns' transcript
    for record in summarizer:
        call = record.json()
        assert call["system"] == INSTRUCTIONS and call["model"] == "claude-sum"
        assert "response_format" not in call and call["stream"] is False
        for name in ("Authorization", "anthropic-version"):  # the client's, as it forwards
            assert record.headers[name] == forwarded.headers[name]
    assert "sk-ant-client" in forwarded.headers["Authorization"]
    sent = forwarded.json()["messages"]
    summary = next(m["content"] for m in sent if "were compacted" in str(m["content"]))
    # one text block, where the proxy's cache breakpoint for its stable content goes
    assert summary[-1]["cache_control"] == {"type": "ephemeral"}
    text = summary[0]["text"]
    assert "summarized by claude-sum-01" in text and "REL-4711" in text
    assert len(sent) < len(conversation(30))
