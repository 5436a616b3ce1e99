"""Shared pieces of the Anthropic end-to-end tests: a proxy with an `anthropic` upstream in front
of the fake Anthropic server, a long conversation with large tool results and thinking blocks,
and scripted synthetic reads."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fakes import FakeUpstream, Recorded, dynamic_reply
from fakes.anthropic import (
    anthropic_message,
    anthropic_stream,
    fake_anthropic,
    text_block,
    thinking_block,
    tool_use_block,
    usage,
)
from fakes.replies import Reply
from proxy_harness import RunningProxy, make_settings, start_proxy

MODEL = "claude-haiku-4-5"
READ = "read_context_artifact"
ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")
BIG = "\n".join(f"line {i}: value={i * 7919 % 10007}" for i in range(800))
CLIENT_TOOL = {
    "name": "dump",
    "description": "Dump the data",
    "input_schema": {"type": "object", "properties": {}},
}


def small_policy() -> str:
    return (
        "extends: default\n"
        "budget: {context_window: 6000, default_reserved_output: 500}\n"
        "steps: [{kind: offload_tool_results, threshold_chars: 2000}, {kind: clear_tool_results},\n"
        "        {kind: drop_turns}]\n"
        "read_tool: {max_rounds: 4}\n"
    )


@asynccontextmanager
async def anthropic_proxy(
    tmp_path: Path, **settings: Any
) -> AsyncIterator[tuple[FakeUpstream, RunningProxy]]:
    """The fake Anthropic server and a proxy routing to it as an `anthropic` upstream, the
    default tenant on the small-window policy."""
    directory = tmp_path / "policies"
    directory.mkdir(exist_ok=True)
    (directory / "small.yaml").write_text(small_policy())
    async with fake_anthropic() as fake:
        upstream = {
            "name": "claude",
            "kind": "anthropic",
            "base_url": fake.origin,
            "timeouts": {"first_byte_s": 60, "idle_read_s": 60, "total_s": 120},
        }
        settings.setdefault("tenants", [{"name": "default", "policy": "small"}])
        proxy = await start_proxy(
            make_settings(
                fake.origin, upstreams=[upstream], policies_dir=str(directory), **settings
            )
        )
        try:
            yield fake, proxy
        finally:
            await proxy.stop()


def exchange(k: int, result: str) -> list[dict[str, Any]]:
    """An assistant turn thinking, then calling `dump` (id `toolu_<k>`), and its result."""
    assistant = {
        "role": "assistant",
        "content": [
            thinking_block(f"I should dump part {k}.", f"sig-{k}-" + "Zm9v" * 8),
            text_block(f"Dumping part {k}."),
            tool_use_block(f"toolu_{k}", "dump", {"part": k}),
        ],
    }
    user = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": result}],
    }
    return [assistant, user]


def long_conversation(exchanges: int = 4) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is on line 512?"}]
    for k in range(exchanges):
        messages += exchange(k, BIG)
    return messages


def artifact_id_in(record: Recorded) -> str:
    found = ARTIFACT_ID.search(json.dumps(record.json()["messages"]))
    assert found is not None, "no tool result was offloaded"
    return found.group(0)


def reading_then(final: str, *, stream: bool = False) -> list[Reply]:
    """Two upstream answers: a read of the offloaded result, then `final` (text)."""

    def read(record: Recorded) -> Reply:
        call = tool_use_block("toolu_read", READ, {"artifact_id": artifact_id_in(record)})
        blocks = [thinking_block("Let me read it.", "sig-read"), call]
        if stream:
            return anthropic_stream(blocks, usage_=usage(100, 7))
        return anthropic_message(blocks, usage_=usage(100, 7))

    last = [text_block(final)]
    answer = (
        anthropic_stream(last, usage_=usage(120, 9))
        if stream
        else anthropic_message(last, usage_=usage(120, 9))
    )
    return [dynamic_reply(read), answer]


def paired(messages: list[dict[str, Any]]) -> bool:
    """Every tool_use is answered in the next user message, and every tool_result answers one."""
    for i, message in enumerate(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        calls = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        results = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
        if results:
            previous = messages[i - 1].get("content") if i else None
            asked = {
                b["id"]
                for b in previous or []
                if isinstance(b, dict) and b.get("type") == "tool_use"
            }
            if results - asked:
                return False
        if calls:
            nxt = messages[i + 1].get("content") if i + 1 < len(messages) else []
            answered = (
                {b.get("tool_use_id") for b in nxt if isinstance(b, dict)}
                if isinstance(nxt, list)
                else set()
            )
            if calls - answered:
                return False
    return True
