"""Preparer: tool results over the offload threshold are offloaded when seen, trigger or not
(`offload_tool_results.when: always`, the default), and only over it with `when: over_trigger`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from pipeline_harness import (
    TENANT,
    Harness,
    agent_history,
    client_bytes,
    make_harness,
    write_policy,
)
from shared_tokens import shared_counters

from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.engine.conversation import Conversation
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.request import OpenAIChat
from proxy.tokens.counters import TokenCounters

POLICY = """
extends: default
budget: {{context_window: 128000, reserved_output: 4000, safety_margin: 0}}
steps:
  - {{kind: offload_tool_results, threshold_chars: 8000, when: {when}}}
  - {{kind: clear_tool_results}}
  - {{kind: drop_turns}}
"""
BIG = 109_000  # chars of the oversized result: far under the trigger of a 128k window


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


def harness(tmp_path: Path, counters: TokenCounters, when: str = "always", **kw: Any) -> Harness:
    write_policy(tmp_path, POLICY.format(when=when))
    return make_harness(tmp_path, counters, **kw)


def history(turns: int = 3, big_at: int = 1) -> list[dict[str, Any]]:
    """Small tool results (2,000 chars), and one of BIG chars in turn `big_at`."""
    messages = agent_history(turns, result_chars=2000)
    big = agent_history(big_at + 1, result_chars=BIG)[-2]
    messages[3 + 4 * big_at]["content"] = big["content"]
    return messages


def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": messages}


def tool_contents(prepared_messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in prepared_messages if m["role"] == "tool"]


async def test_an_oversized_result_under_the_trigger_is_offloaded(
    tmp_path: Path, counters: TokenCounters
) -> None:
    h = harness(tmp_path, counters)
    messages = history()
    big = next(m["content"] for m in messages if m["role"] == "tool" and len(m["content"]) > 8000)
    prepared = await h.prepare(body(messages))
    manifest = prepared.manifest
    assert manifest.tokens_before <= manifest.trigger  # under the trigger all along
    assert prepared.changed and manifest.outcome == "reduced"
    [action] = manifest.actions
    assert action.step == "offload_tool_results"
    assert action.reason == "tool result over 8000 chars: offloaded when seen"
    contents = tool_contents(prepared.parsed["messages"])
    [preview] = [c for c in contents if h.own_text(c)]
    [artifact_id] = action.artifact_ids
    assert f"offloaded as artifact {artifact_id}; original {len(big)} chars" in preview
    assert f"stored {len(big)} chars, complete." in preview
    stored = await h.store.get(TENANT.scope, artifact_id)
    assert stored is not None and stored.content == big
    assert [c for c in contents if not h.own_text(c)] == [
        m["content"] for m in messages if m["role"] == "tool" and len(m["content"]) <= 8000
    ]
    assert prepared.synthetic is not None  # the model can read the rest


async def test_the_same_history_prepares_to_the_same_bytes_and_stays_a_prefix(
    tmp_path: Path, counters: TokenCounters
) -> None:
    h = harness(tmp_path, counters)
    first, again = await h.prepare(body(history(3))), await h.prepare(body(history(3)))
    assert first.body == again.body
    longer = history(5)
    assert longer[: len(history(3))] == history(3)
    grown = await h.prepare(body(longer))
    old = first.parsed["messages"]
    assert grown.parsed["messages"][: len(old)] == old  # offloaded from its first turn on


async def test_over_trigger_policy_keeps_the_old_behaviour(
    tmp_path: Path, counters: TokenCounters
) -> None:
    h = harness(tmp_path, counters, when="over_trigger")
    request = body(history())
    prepared = await h.prepare(request)
    assert not prepared.changed and prepared.body == client_bytes(request)
    assert prepared.manifest.outcome == "within_trigger"


class ConfirmsNothing(MemoryStore):
    async def put_many(
        self, scope: str, items: Mapping[str, NewArtifact], *, ttl_seconds: int, max_per_scope: int
    ) -> set[str]:
        return set()


async def test_a_store_failure_keeps_the_content_and_shows_no_id(
    tmp_path: Path, counters: TokenCounters
) -> None:
    h = harness(tmp_path, counters, store=ConfirmsNothing(b"s"))
    request = body(history())
    prepared = await h.prepare(request)
    assert not prepared.changed and prepared.body == client_bytes(request)
    assert b"art_" not in prepared.body
    assert prepared.manifest.outcome == "within_trigger"
    assert prepared.manifest.notes == [
        "artifact store did not confirm 1 write(s): that content was kept"
    ]


class CountingParses(OpenAIChat):
    def __init__(self) -> None:
        self.parses = 0

    def parse(self, items: Sequence[Any]) -> Conversation:  # type: ignore[override]
        self.parses += 1
        return super().parse(items)


async def test_requests_without_oversized_results_skip_the_parse(
    tmp_path: Path, counters: TokenCounters
) -> None:
    h = harness(tmp_path, counters)
    wire = CountingParses()
    small = body(agent_history(4, result_chars=7900))
    prepared = await h.preparer.prepare(small, client_bytes(small), TENANT, wire)
    assert not prepared.changed and wire.parses == 0
    await h.preparer.prepare(body(history()), client_bytes(body(history())), TENANT, wire)
    assert wire.parses == 1
    assert OPENAI_CHAT.is_tool_result({"role": "tool"}) and not wire.is_tool_result([])
