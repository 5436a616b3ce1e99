"""Preparer and the working set: read exchanges put back go upstream in the bytes sent, with the
read tools once, whether the request is then reduced or not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pipeline_harness import SMALL, TENANT, Harness, agent_history, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.engine.manifest import Prepared
from proxy.engine.working_set import WorkingSetKey, history_digest, remember
from proxy.formats.openai_chat import OPENAI_CHAT

READ_CALL = {"role": "assistant", "content": None, "tool_calls": [{
    "id": "c1", "type": "function",
    "function": {"name": "read_context_artifact", "arguments": '{"artifact_id": "x"}'},
}]}
EXCHANGE = [READ_CALL, {"role": "tool", "tool_call_id": "c1", "content": '{"content": "line 3"}'}]


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    write_policy(tmp_path, SMALL)
    return make_harness(tmp_path, shared_counters())


async def prepared_after_a_read(harness: Harness, history: list[dict[str, Any]]) -> Prepared:
    """`history`, the model's read of it (kept in the working set), its answer and a question."""
    key = WorkingSetKey(TENANT.scope, history_digest(OPENAI_CHAT, history), 60, 100)
    assert await remember(harness.store, key, EXCHANGE)
    answer = {"role": "assistant", "content": "an error on line 3"}
    messages = [*history, answer, {"role": "user", "content": "Why?"}]
    return await harness.prepare({"model": "gpt-4o", "messages": messages})


def read_tools(prepared: Prepared) -> list[str]:
    return [tool["function"]["name"] for tool in prepared.parsed["tools"]]


async def test_under_the_trigger_the_bytes_sent_hold_the_exchange_put_back(
    harness: Harness,
) -> None:
    prepared = await prepared_after_a_read(harness, [{"role": "user", "content": "the log?"}])
    assert prepared.manifest.outcome == "within_trigger" and prepared.changed
    assert orjson.loads(prepared.body) == prepared.parsed
    assert prepared.parsed["messages"][1:3] == EXCHANGE
    assert read_tools(prepared) == ["read_context_artifact", "search_context_artifact"]


async def test_reduced_as_well_the_request_carries_the_read_tools_once(harness: Harness) -> None:
    prepared = await prepared_after_a_read(harness, agent_history(6))
    assert prepared.manifest.outcome in ("reduced", "reduced_above_target")
    assert orjson.loads(prepared.body) == prepared.parsed
    assert EXCHANGE[0] in prepared.parsed["messages"]
    assert read_tools(prepared) == ["read_context_artifact", "search_context_artifact"]
    assert prepared.synthetic is not None
