"""The property of issue 27's "done when" (hypothesis): for any conversation, policy and count
ratio moving between its requests,

- tokens after <= tokens before: a request is never sent larger than it came (it could only be,
  were it reduced to fit, and no reduction makes a request larger);
- a fitting request's prefix is never changed: when the previous prepared request with this
  request's new messages appended fits under this request's trigger, the prepared request starts
  with the previous one (its tools block, then its messages). The one exception is a request
  whose new messages bring the first result worth offloading: the read tools are added to the
  tools block (once per conversation, and only when the offload saves more than they cost);
- cut points stable under ratio changes: the dropped span of a previous request stays dropped
  the same way, which the prefix property above implies for every request that fits.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from moving_ratio import MovingRatio, Step, kept_prefix, replay, requests_of
from pipeline_harness import write_policy
from shared_tokens import shared_catalog, shared_counters
from strategies import conversations

from proxy.artifacts.store import MemoryStore
from proxy.engine.preparer import Preparer
from proxy.http.auth import Tenant
from proxy.policy.store import PolicyStore

WINDOWS = (600, 1500, 4000, 16000)
POLICY = """
extends: default
mode: {mode}
budget: {{context_window: {window}, reserved_output: 200, safety_margin: 0,
         trigger: 0.9, target: 0.6}}
steps:
  - {{kind: offload_tool_results, threshold_chars: 2000, preview_head_chars: 200,
     preview_tail_chars: 100}}
  - {{kind: clear_tool_results, keep_recent_exchanges: 1}}
  - {{kind: drop_turns, keep_recent_turns: 1}}
"""
RATIOS = (0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25)
EXAMPLES = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TENANT = Tenant(name="p", policy="", scope="p:scope", upstream_key=None, passthrough=True)


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> PolicyStore:
    directory: Path = tmp_path_factory.mktemp("policies")
    for window in WINDOWS:
        for mode in ("window", "compact"):
            write_policy(directory, POLICY.format(window=window, mode=mode), f"{mode}{window}")
    return PolicyStore.load(directory)


def run(
    loop: asyncio.AbstractEventLoop,
    policies: PolicyStore,
    policy: str,
    messages: list[Any],
    ratios: tuple[float, ...],
) -> list[Step]:
    """The conversation's requests in turn, each under the next ratio, through one preparer and
    one store (a fresh one: the property holds from a conversation's first request on)."""
    ratio = MovingRatio()
    counters = shared_counters()
    preparer = Preparer(
        policies=policies, counters=counters, catalog=shared_catalog(),
        store=MemoryStore(b"property"), calibration=ratio,
    )  # fmt: skip
    tenant = Tenant(TENANT.name, policy, TENANT.scope, None, True)
    counter = counters.for_model("gpt-4o")
    try:
        steps = replay(preparer, ratio, tenant, requests_of(messages), ratios, counter)
        return loop.run_until_complete(steps)
    finally:
        preparer.close()


def first_read_tools(previous: dict[str, Any], current: dict[str, Any], step: Step) -> bool:
    """The read tools are added to the tools block for the first time, by an offload of this
    request's new messages made as they were seen (the messages keep the previous prefix)."""
    old, new = previous["messages"], current["messages"]
    had = len(previous.get("tools") or [])
    added = (current.get("tools") or [])[had:]
    eager = all(a.step == "offload_tool_results" for a in step.manifest.actions)
    return new[: len(old)] == old and len(added) == 2 and eager


@EXAMPLES
@given(
    messages=conversations(max_turns=8, max_steps=4),
    window=st.sampled_from(WINDOWS),
    mode=st.sampled_from(("window", "compact")),
    ratios=st.lists(st.sampled_from(RATIOS), min_size=1, max_size=6).map(tuple),
)
def test_never_larger_and_a_fitting_prefix_is_never_changed(
    loop: asyncio.AbstractEventLoop,
    policies: PolicyStore,
    messages: list[Any],
    window: int,
    mode: str,
    ratios: tuple[float, ...],
) -> None:
    steps = run(loop, policies, f"{mode}{window}", messages, ratios)
    previous: Step | None = None
    for step in steps:
        if step.body is None:  # refused: only protected content that cannot fit is
            previous = None
            continue
        manifest = step.manifest
        assert manifest.tokens_after <= manifest.tokens_before
        if previous is not None and previous.body is not None and step.fits:
            kept = kept_prefix(previous.body, step.body)
            first = not kept and first_read_tools(previous.body, step.body, step)
            what = "prefix kept" if kept else "read tools added" if first else "CHANGED"
            event(f"a fitting request: {what}")
            assert kept or first
        previous = step
