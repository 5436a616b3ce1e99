"""offload_tool_results: oversized tool results become a preview naming the stored original."""

from __future__ import annotations

import copy

import pytest
from context_harness import artifact_id, big, call, make_ctx, result, user
from step_harness import (
    ALPHA,
    GAMMA,
    OFFLOAD,
    TOOL_UNITS,
    expected_preview,
    offload,
    replaced_cost,
    tool_ctx,
    tool_history,
)

from proxy.artifacts.store import NewArtifact
from proxy.engine.step_api import Edit
from proxy.engine.steps.offload_tool_results import OffloadToolResultsConfig
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.fields import with_content


def test_config_defaults_are_the_documented_ones() -> None:
    config = OffloadToolResultsConfig()
    assert (config.threshold_chars, config.preview_head_chars, config.preview_tail_chars) == (
        8000,
        1500,
        500,
    )
    assert config.exclude_tools == [] and config.relaxed() is None


def test_settings_come_from_the_step_config() -> None:
    ctx = tool_ctx()
    wide = OffloadToolResultsConfig(**{**OFFLOAD, "preview_head_chars": 300})
    step = offload(ctx, preview_head_chars=300)
    [edit] = step.rewrite(ctx, [1]).edits
    assert edit.message == with_content(ctx.messages[3], expected_preview(ctx, 3, ALPHA, wide))
    assert offload(ctx, threshold_chars=5000).rewrite(ctx, [1, 7]).edits == []


def test_offload_plan_costs_and_limits() -> None:
    ctx = tool_ctx()
    plan = offload(ctx).plan(ctx)
    assert plan.keeps_from is None  # shrinks results, removes no unit
    assert plan.limits == [t + 1 for t in range(9)]  # every unit so far
    assert plan.cuts is None and plan.extra_cost == 0 and plan.at_least == 0
    assert plan.target is None
    expected = [ctx.unit_cost(u) for u in range(9)]
    for u, (index, text, _, _) in TOOL_UNITS.items():
        expected[u] = replaced_cost(ctx, u, index, expected_preview(ctx, index, text))
        assert expected[u] < ctx.unit_cost(u)
    assert plan.costs == expected  # "tiny" (u4) is under the threshold: full cost


def test_offload_rewrite_edits_artifacts_and_tokens_freed() -> None:
    messages = tool_history()
    before = copy.deepcopy(messages)
    ctx = tool_ctx(messages)
    step = offload(ctx)
    plan = step.plan(ctx)
    out = step.rewrite(ctx, list(range(9)))
    assert out.units == [1, 7]
    assert out.edits == [
        Edit("replace", i, with_content(messages[i], expected_preview(ctx, i, t)), artifact_id(t))
        for i, t in ((3, ALPHA), (11, GAMMA))
    ]
    step_name = "offload_tool_results"
    assert out.artifacts == {
        artifact_id(ALPHA): NewArtifact(
            ALPHA, "tool_result", {"tool": "read_file", "tool_call_id": "c0", "step": step_name}
        ),
        artifact_id(GAMMA): NewArtifact(
            GAMMA, "tool_result", {"tool": "grep", "tool_call_id": "c2", "step": step_name}
        ),
    }
    assert out.tokens_freed == sum(ctx.unit_cost(u) - plan.costs[u] for u in (1, 7)) > 0
    # every field but content kept (including unknown ones); the input is never mutated
    edited = out.edits[0].message
    assert edited is not None
    assert {k: v for k, v in edited.items() if k != "content"} == {
        "role": "tool",
        "tool_call_id": "c0",
        "x_extra": {"keep": True},
    }
    assert messages == before


def test_offload_rewrite_only_touches_the_given_units() -> None:
    ctx = tool_ctx()
    out = offload(ctx).rewrite(ctx, [0, 1, 2])
    assert out.units == [1]
    assert [e.index for e in out.edits] == [3]
    assert list(out.artifacts) == [artifact_id(ALPHA)]
    assert offload(ctx).rewrite(ctx, []).edits == []


def test_offload_preview_without_read_tool_names_the_endpoint() -> None:
    ctx = tool_ctx(read_tool={"enabled": False})
    out = offload(ctx).rewrite(ctx, [1])
    content = out.edits[0].message["content"]  # type: ignore[index]
    assert f"/v1/context/artifacts/{artifact_id(ALPHA)}" in content
    assert "read_context_artifact" not in content


@pytest.mark.parametrize(
    ("chars", "threshold", "head", "tail", "offloaded"),
    [
        (2000, 2000, 100, 50, False),  # at the threshold: kept
        (2001, 2000, 100, 50, True),  # one over: offloaded
        (2000, 500, 1500, 500, False),  # head + tail would show everything
        (2000, 500, 500, 500, True),
    ],
)
def test_offload_threshold_and_preview_size(
    chars: int, threshold: int, head: int, tail: int, offloaded: bool
) -> None:
    text = big("t", chars)
    messages = [user("go"), call("c", "read_file"), result("c", text)]
    ctx = make_ctx(messages)
    step = offload(ctx, threshold_chars=threshold, preview_head_chars=head, preview_tail_chars=tail)
    assert (step.plan(ctx).costs[1] < ctx.unit_cost(1)) is offloaded
    assert bool(step.rewrite(ctx, [1]).edits) is offloaded


def test_offload_skips_a_preview_that_would_cost_more() -> None:
    # 40 chars over a 0 threshold: the preview's header alone is longer than the result
    messages = [user("go"), call("c", "f"), result("c", "x" * 40)]
    ctx = make_ctx(messages)
    step = offload(ctx, threshold_chars=0, preview_head_chars=1, preview_tail_chars=1)
    assert step.plan(ctx).costs == [ctx.unit_cost(0), ctx.unit_cost(1)]
    out = step.rewrite(ctx, [0, 1])
    assert out.edits == [] and out.artifacts == {} and out.units == [] and out.tokens_freed == 0


def test_offload_text_parts_are_joined_and_replaced_by_a_string() -> None:
    parts = [{"type": "text", "text": ALPHA[:1000]}, {"type": "text", "text": ALPHA[1000:]}]
    messages = [user("go"), call("c", "read_file"), result("c", parts)]
    ctx = tool_ctx(messages)
    out = offload(ctx).rewrite(ctx, [1])
    [edit] = out.edits
    assert edit.artifact_id == artifact_id(ALPHA)
    assert edit.message == with_content(messages[2], expected_preview(ctx, 2, ALPHA))
    assert out.artifacts[artifact_id(ALPHA)].content == ALPHA


def test_offload_parallel_results_each_get_their_own_artifact() -> None:
    exchange = call("p1", "read_file")
    exchange["tool_calls"].append(
        {"id": "p2", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
    )
    messages = [user("go"), exchange, result("p2", GAMMA), result("p1", ALPHA)]
    ctx = tool_ctx(messages)
    out = offload(ctx).rewrite(ctx, [1])
    assert [(e.index, e.artifact_id) for e in out.edits] == [
        (2, artifact_id(GAMMA)),
        (3, artifact_id(ALPHA)),
    ]
    metas = {a.content: a.meta for a in out.artifacts.values()}
    assert metas[GAMMA]["tool"] == "grep" and metas[GAMMA]["tool_call_id"] == "p2"
    assert metas[ALPHA]["tool"] == "read_file" and metas[ALPHA]["tool_call_id"] == "p1"


def test_the_quick_scan_acts_only_when_always_and_over_the_threshold() -> None:
    """Mutation run 4: the scan before parsing, at its exact bounds."""
    at, over = result("c1", "x" * 500), result("c2", "x" * 501)
    always = OffloadToolResultsConfig(**OFFLOAD)  # `when: always` is the default
    assert not always.acts_under_trigger(OPENAI_CHAT, [at], 10**6)  # exactly the threshold
    assert always.acts_under_trigger(OPENAI_CHAT, [at, over], 10**6)
    over_trigger = OffloadToolResultsConfig(**{**OFFLOAD, "when": "over_trigger"})
    assert not over_trigger.acts_under_trigger(OPENAI_CHAT, [over], 10**6)
