"""Preparer on a store whose write budget refuses: nothing is lost (the content the store did not
take stays in the prompt, never an id without its artifact), the manifest names the budget (note
code `store_write_budget`), and a request that cannot fit without those writes is refused as
`context_length_exceeded` with that reason, not as a store outage."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pipeline_harness import TENANT, agent_history, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.artifacts.budgets import (
    Confirmed,
    Refused,
    WriteBudget,
    WriteBudgets,
    WriteLimit,
    counted_bytes,
)
from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.engine.manifest import NoteCode, Outcome
from proxy.errors import ErrorCode, ProxyError, RefusalReason
from proxy.http.auth import Tenant
from proxy.jsonio import dumps
from proxy.tokens.counters import TokenCounters

MODEL = "gpt-4o"
ARTIFACT = re.compile(r"art_[0-9a-f]{32}")
OFFLOAD = """extends: default
budget: {context_window: 128000}
steps: [{kind: offload_tool_results, threshold_chars: 1000}]
"""
TIGHT = """extends: default
budget: {context_window: 6000, reserved_output: 500, safety_margin: 0}
steps:
  - {kind: offload_tool_results, threshold_chars: 1000}
  - {kind: clear_tool_results, keep_recent_exchanges: 0}
  - {kind: drop_turns, keep_recent_turns: 1}
"""


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


def store(live: int) -> MemoryStore:
    return MemoryStore(b"test-secret", budgets=WriteBudgets(WriteBudget(None, live)))


def results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_what_the_budget_refuses_stays_in_the_prompt_and_the_note_names_it(
    tmp_path: Path, counters: TokenCounters
) -> None:
    write_policy(tmp_path, OFFLOAD)
    harness = make_harness(tmp_path, counters, store(live=14_000))
    body = {"model": MODEL, "messages": agent_history(4, result_chars=6000)}
    prepared = await harness.prepare(body)
    sent = results(prepared.parsed)
    offloaded = [t for t in sent if ARTIFACT.search(t)]
    assert len(offloaded) == 2, "two results of ~6,000 bytes fit 14,000 live bytes"
    assert [t for t in sent if not ARTIFACT.search(t)] == results(body)[2:]  # kept whole
    for text in offloaded:  # every id shown was stored
        [artifact_id] = set(ARTIFACT.findall(text))
        assert await harness.store.get(TENANT.scope, artifact_id) is not None
    manifest = prepared.manifest
    assert manifest.note_codes == [NoteCode.store_write_budget]
    refused = sum(len(t) for t in results(body)[2:])
    assert manifest.notes == [
        f"store write budget of this tenant reached, live_bytes (14,000 bytes): 2 write(s) of "
        f"{refused:,} bytes refused: that content was kept in the prompt"
    ]
    assert prepared.headers()["x-ctxproxy-notes"] == "store_write_budget"
    assert manifest.outcome is Outcome.reduced


async def test_a_request_that_cannot_fit_without_the_refused_writes_is_refused_as_such(
    tmp_path: Path, counters: TokenCounters
) -> None:
    write_policy(tmp_path, TIGHT)
    harness = make_harness(tmp_path, counters, store(live=100))
    body = {"model": MODEL, "messages": agent_history(6, result_chars=6000)}
    with pytest.raises(ProxyError) as caught:
        await harness.prepare(body)
    error = caught.value
    assert error.code is ErrorCode.context_length_exceeded
    assert error.reason is RefusalReason.store_write_budget
    assert (error.details or {})["reason"] == "store_write_budget"
    assert error.message.endswith(
        "(context_length_exceeded) The proxy could not store what it would remove: this "
        "tenant's artifact store write budget is used up (bytes per minute, or bytes held "
        "until they expire)."
    )


async def test_another_tenant_is_prepared_as_usual(tmp_path: Path, counters: TokenCounters) -> None:
    write_policy(tmp_path, TIGHT)
    limits = WriteBudgets(WriteBudget(None, 10_000_000), {"t:greedy": WriteBudget(None, 100)})
    harness = make_harness(tmp_path, counters, MemoryStore(b"test-secret", budgets=limits))
    body = {"model": MODEL, "messages": agent_history(6, result_chars=6000)}
    greedy = Tenant(name="t", policy="test", scope="t:greedy", upstream_key=None, passthrough=True)
    with pytest.raises(ProxyError):
        await harness.prepare(body, greedy)
    prepared = await harness.prepare(body)
    assert prepared.manifest.outcome is Outcome.reduced and not prepared.manifest.note_codes


class RefusesResults(MemoryStore):
    """As over a write budget, refuses the tool results' own artifacts and stores the rest."""

    async def put_many(
        self,
        scope: str,
        items: Mapping[str, NewArtifact],
        *,
        ttl_seconds: int,
        max_per_scope: int,
    ) -> set[str]:
        taken = {i: a for i, a in items.items() if a.kind != "tool_result"}
        refused = [a for a in items.values() if a.kind == "tool_result"]
        stored = await super().put_many(
            scope, taken, ttl_seconds=ttl_seconds, max_per_scope=max_per_scope
        )
        size = sum(counted_bytes(a.content) for a in refused)
        return Confirmed(stored, [Refused(WriteLimit.live_bytes, 1, len(refused), size)])


COMPACT = """extends: default
budget: {context_window: 8000, reserved_output: 500, safety_margin: 0, trigger: 0.95}
steps: [{kind: summarize, keep_recent_turns: 1}]
"""


async def test_a_summary_naming_a_result_the_store_refused_is_not_sent(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """The summary item names the archive and each tool result's own artifact: when the store
    takes the archive but refuses the results (a budget reached between them), the summary
    would name ids that were never stored, so it is not sent: those turns stay."""
    write_policy(tmp_path, COMPACT)
    body = {"model": MODEL, "messages": agent_history(10, result_chars=3000)}
    usual = await make_harness(tmp_path, counters).prepare(body)
    [action] = usual.manifest.actions
    assert action.step == "summarize" and "tail" in (action.detail or {})
    store = RefusesResults(b"test-secret")
    try:
        prepared = await make_harness(tmp_path, counters, store).prepare(body)
    except ProxyError as error:
        assert error.reason is RefusalReason.store_write_budget
        return
    shown = set(ARTIFACT.findall(dumps(prepared.parsed).decode()))
    assert shown and shown == set(await store.get_many(TENANT.scope, list(shown)))
    assert NoteCode.store_write_budget in prepared.manifest.note_codes
