"""Preparer: what a reduced request carries (its notes word for word, the read tools' terms), and
a reduction that would not fit."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from pipeline_harness import agent_history, client_bytes, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.engine.manifest import Outcome, Prepared, SyntheticTools
from proxy.tokens.counters import TokenCounters

MODEL = "gpt-4o"


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


async def prepared_with_cap(tmp_path: Path, counters: TokenCounters, cap: int) -> Prepared:
    """Six turns of large results, offloaded over a low trigger; `cap`: artifacts.max_per_scope."""
    write_policy(
        tmp_path / str(cap),
        "extends: default\n"
        "budget: {context_window: 128000, trigger: 2000, target: 1500}\n"
        "protect: {recent_turns: 1, recent_tool_exchanges: 0}\n"
        "steps: [{kind: offload_tool_results, threshold_chars: 1000}]\n"
        "read_tool: {max_rounds: 3, max_page_chars: 5000}\n"
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
    assert over.synthetic == SyntheticTools(3, 5000, over.manifest.allowance)


class ConfirmsShortOnes(MemoryStore):
    """An artifact store that confirms only contents under 2,000 characters."""

    async def put_many(
        self, scope: str, items: Mapping[str, NewArtifact], *, ttl_seconds: int, max_per_scope: int
    ) -> set[str]:
        short = {i: item for i, item in items.items() if len(item.content) < 2000}
        return await super().put_many(
            scope, short, ttl_seconds=ttl_seconds, max_per_scope=max_per_scope
        )


async def test_a_reduction_that_would_not_fit_sends_the_request_that_fits_as_it_came(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """Two results are offloaded by plan; the store confirms only the smaller one, whose preview
    frees less than the read tools cost: reduced, the request would be larger than it came. At
    exactly the allowance it goes as it came."""
    messages = agent_history(2, result_chars=1100)
    messages[3]["content"] = "x" * 6000
    body = {"model": MODEL, "messages": messages}
    n = counters.for_model(MODEL).count_request(body)
    write_policy(
        tmp_path,
        "extends: default\n"
        f"budget: {{context_window: {n}, reserved_output: 0, safety_margin: 0, "
        "trigger: 300, target: 300}\n"
        "steps: [{kind: offload_tool_results, threshold_chars: 1000, preview_head_chars: 300, "
        "preview_tail_chars: 100}]\n",
    )
    harness = make_harness(tmp_path, counters, ConfirmsShortOnes(b"s"))
    prepared = await harness.prepare(body)
    assert prepared.manifest.notes == [
        "artifact store did not confirm 1 write(s): that content was kept",
        "the reduced request would not fit: forwarded unchanged",
    ]
    assert prepared.manifest.outcome == Outcome.within_allowance
    assert not prepared.changed and prepared.body == client_bytes(body)
    assert prepared.manifest.tokens_after == prepared.manifest.tokens_before == n
