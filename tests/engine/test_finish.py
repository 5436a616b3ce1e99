"""What goes upstream after the steps (`engine.finish`), never worse than the request as it came:
a reduction that would not make the request smaller is not sent, and the manifest says so."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from pipeline_harness import agent_history, client_bytes, make_harness, write_policy
from shared_tokens import shared_counters

from bench.overhead import bodies
from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.engine.finish import CUTS_REFUSED, NOT_SMALLER
from proxy.engine.manifest import NoteCode, Outcome
from proxy.tokens.counters import TokenCounters

MODEL = "gpt-4o"
EAGER = """
extends: default
steps:
  - {kind: offload_tool_results, threshold_chars: 1000, preview_head_chars: 300,
     preview_tail_chars: 100}
  - {kind: clear_tool_results}
  - {kind: drop_turns}
"""
OVERHEAD_OFFLOAD = Path(__file__).parents[2] / "bench/overhead/policies/overhead-offload.yaml"


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


def one_result(chars: int) -> list[dict[str, Any]]:
    """System, task, one tool call and its result of about `chars` characters."""
    return agent_history(1, result_chars=chars)[:-1]


async def test_an_eager_offload_that_costs_more_than_it_saves_is_not_made(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """The issue's case: one 1,100-character result over a 1,000-character threshold. Its preview
    saves less than the read tools it brings cost: the request goes as it came."""
    write_policy(tmp_path, EAGER)
    harness = make_harness(tmp_path, counters)
    body = {"model": MODEL, "messages": one_result(1100)}
    prepared = await harness.prepare(body)
    manifest = prepared.manifest
    assert not prepared.changed and prepared.body == client_bytes(body)
    assert manifest.tokens_after == manifest.tokens_before
    assert manifest.actions == [] and manifest.outcome == Outcome.within_trigger
    assert manifest.note_codes == [NoteCode.never_worse] and manifest.notes == [CUTS_REFUSED]
    # a result whose preview pays for the tools is still offloaded when seen
    big = {"model": MODEL, "messages": one_result(20_000)}
    offloaded = await harness.prepare(big)
    assert offloaded.changed and [a.step for a in offloaded.manifest.actions] == [
        "offload_tool_results"
    ]
    assert offloaded.manifest.tokens_after < offloaded.manifest.tokens_before
    assert NoteCode.never_worse not in offloaded.manifest.note_codes


async def test_a_cut_that_would_grow_the_request_is_not_made(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """The overhead benchmark's 2 KB body under its offload policy: over the trigger, but what
    the steps can free (its protected tail is most of it) does not pay for the read tools."""
    write_policy(tmp_path, OVERHEAD_OFFLOAD.read_text())
    harness = make_harness(tmp_path, counters)
    body = orjson.loads(bodies.build_body(bodies.SIZES["2KB"]))
    prepared = await harness.prepare(body)
    manifest = prepared.manifest
    assert manifest.tokens_before > manifest.trigger
    assert not prepared.changed and manifest.tokens_after == manifest.tokens_before
    assert manifest.outcome == Outcome.nothing_reduced
    assert manifest.note_codes == [NoteCode.never_worse]


class ConfirmsShortOnes(MemoryStore):
    """An artifact store that confirms only contents under 2,000 characters."""

    async def put_many(
        self, scope: str, items: Mapping[str, NewArtifact], *, ttl_seconds: int, max_per_scope: int
    ) -> set[str]:
        short = {i: item for i, item in items.items() if len(item.content) < 2000}
        return await super().put_many(
            scope, short, ttl_seconds=ttl_seconds, max_per_scope=max_per_scope
        )


async def test_a_reduction_the_store_left_larger_than_the_request_goes_as_it_came(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """Two results offloaded by plan (the large one pays for the read tools, the small one then
    costs nothing more); the store confirms only the small one, whose preview frees less than the
    tools cost. The request fits either way: it goes as it came, the note says why."""
    write_policy(tmp_path, EAGER)
    harness = make_harness(tmp_path, counters, ConfirmsShortOnes(b"s"))
    messages = agent_history(2, result_chars=1100)
    messages[3]["content"] = "x" * 6000
    body = {"model": MODEL, "messages": messages}
    prepared = await harness.prepare(body)
    manifest = prepared.manifest
    assert not prepared.changed and prepared.body == client_bytes(body)
    assert manifest.tokens_after == manifest.tokens_before
    assert manifest.note_codes == [NoteCode.never_worse]
    assert manifest.notes == [
        "artifact store did not confirm 1 write(s): that content was kept",
        NOT_SMALLER,
    ]
