"""Preparer: the notes a reduced request's manifest carries, word for word."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeline_harness import agent_history, make_harness, write_policy

from proxy.engine.manifest import Prepared
from proxy.tokens.counters import TokenCounters

MODEL = "gpt-4o"


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return TokenCounters()


async def prepared_with_cap(tmp_path: Path, counters: TokenCounters, cap: int) -> Prepared:
    """Six turns of large results, offloaded over a low trigger; `cap`: artifacts.max_per_scope."""
    write_policy(
        tmp_path / str(cap),
        "extends: default\n"
        "budget: {context_window: 128000, trigger: 2000, target: 1500}\n"
        "protect: {recent_turns: 1, recent_tool_exchanges: 0}\n"
        "steps: [{kind: offload_tool_results, threshold_chars: 1000}]\n"
        f"artifacts: {{max_per_scope: {cap}}}\n",
    )
    body = {"model": MODEL, "messages": agent_history(6, result_chars=6000)}
    return await make_harness(tmp_path / str(cap), counters).prepare(body)


def referenced(prepared: Prepared) -> set[str]:
    return {i for action in prepared.manifest.actions for i in action.artifact_ids}


async def test_a_request_referencing_more_artifacts_than_the_scope_cap_says_so(
    tmp_path: Path, counters: TokenCounters
) -> None:
    n = len(referenced(await prepared_with_cap(tmp_path, counters, 1000)))
    assert n >= 3
    at_cap = await prepared_with_cap(tmp_path, counters, n)
    assert len(referenced(at_cap)) == n and at_cap.manifest.notes == []
    over = await prepared_with_cap(tmp_path, counters, n - 1)
    assert len(referenced(over)) == n
    assert over.manifest.notes == [
        f"this request references {n} artifacts, more than artifacts.max_per_scope ({n - 1}): "
        "all are kept, the scope's other artifacts are evicted first"
    ]
