"""The reduction steps on small hand-made conversations: plan() and rewrite()."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from context_harness import (
    artifact_id,
    assistant,
    big,
    call,
    counter,
    make_ctx,
    policy,
    result,
    system,
    user,
)

from proxy.artifacts.store import NewArtifact
from proxy.engine.step_api import MARKER, Edit, PrepareContext
from proxy.engine.steps import REGISTRY, build_steps
from proxy.engine.steps.clear_tool_results import ClearToolResults, ClearToolResultsConfig
from proxy.engine.steps.drop_turns import DropTurns, DropTurnsConfig, notice_message
from proxy.engine.steps.offload_tool_results import OffloadToolResults, OffloadToolResultsConfig
from proxy.engine.tool_text import placeholder, preview, with_content

ALPHA = big("alpha", 2000)
GAMMA = big("gamma", 3000)


def tool_history() -> list[dict[str, Any]]:
    """Three turns with one tool exchange each (units: user, exchange, answer per turn)."""
    return [
        system(),  # 0
        user("Task: audit the repository."),  # 1  u0
        call("c0", "read_file", '{"path": "a.py"}'),  # 2  u1 (2-3)
        result("c0", ALPHA, x_extra={"keep": True}),  # 3
        assistant("a.py is fine."),  # 4  u2
        user("Next, please."),  # 5  u3
        call("c1", "read_file", '{"path": "b.py"}'),  # 6  u4 (6-7)
        result("c1", "tiny"),  # 7
        assistant("b.py is fine."),  # 8  u5
        user("And the last one."),  # 9  u6
        {**call("c2", "grep", '{"pattern": "TODO"}'), "content": "Searching."},  # 10 u7
        result("c2", GAMMA),  # 11
        assistant("Done."),  # 12 u8
    ]


TOOL_UNITS = {1: (3, ALPHA, "read_file", "c0"), 7: (11, GAMMA, "grep", "c2")}
OFFLOAD = {"offload_threshold_chars": 500, "preview_head_chars": 100, "preview_tail_chars": 50}


def offload_ctx(messages: list[dict[str, Any]] | None = None, **sections: Any) -> PrepareContext:
    tool_results = {**OFFLOAD, **sections.pop("tool_results", {})}
    return make_ctx(messages or tool_history(), policy(tool_results=tool_results, **sections))


def offload(ctx: PrepareContext) -> OffloadToolResults:
    return OffloadToolResults(OffloadToolResultsConfig(), ctx)


def clear(ctx: PrepareContext) -> ClearToolResults:
    return ClearToolResults(ClearToolResultsConfig(), ctx)


def expected_preview(ctx: PrepareContext, index: int, text: str) -> str:
    settings = ctx.policy.tool_results
    return preview(
        artifact_id(text),
        text,
        ctx.message_costs[index],
        settings.preview_head_chars,
        settings.preview_tail_chars,
        ctx.policy.read_tool.enabled,
    )


def replaced_cost(ctx: PrepareContext, u: int, index: int, content: str) -> int:
    new = counter().count_message(with_content(ctx.messages[index], content))
    return ctx.unit_cost(u) - ctx.message_costs[index] + new


# ---------------------------------------------------------------- registry


def test_registry_and_build_steps_follow_policy_order() -> None:
    assert set(REGISTRY) == {"offload_tool_results", "clear_tool_results", "drop_turns"}
    ctx = make_ctx(tool_history())
    steps = build_steps(list(reversed(ctx.policy.steps)), ctx)
    assert [(s.name, s.rank) for s in steps] == [
        ("drop_turns", 3),
        ("clear_tool_results", 2),
        ("offload_tool_results", 1),
    ]


# ---------------------------------------------------------------- offload_tool_results


def test_offload_plan_costs_and_limits() -> None:
    ctx = offload_ctx()
    plan = offload(ctx).plan(ctx)
    assert plan.rank == 1
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
    ctx = offload_ctx(messages)
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
    ctx = offload_ctx()
    out = offload(ctx).rewrite(ctx, [0, 1, 2])
    assert out.units == [1]
    assert [e.index for e in out.edits] == [3]
    assert list(out.artifacts) == [artifact_id(ALPHA)]
    assert offload(ctx).rewrite(ctx, []).edits == []


def test_offload_preview_without_read_tool_names_the_endpoint() -> None:
    ctx = offload_ctx(read_tool={"enabled": False})
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
    settings = {
        "offload_threshold_chars": threshold,
        "preview_head_chars": head,
        "preview_tail_chars": tail,
    }
    ctx = make_ctx(messages, policy(tool_results=settings))
    step = offload(ctx)
    assert (step.plan(ctx).costs[1] < ctx.unit_cost(1)) is offloaded
    assert bool(step.rewrite(ctx, [1]).edits) is offloaded


def test_offload_skips_a_preview_that_would_cost_more() -> None:
    # 40 chars over a 0 threshold: the preview's header alone is longer than the result
    messages = [user("go"), call("c", "f"), result("c", "x" * 40)]
    settings = {"offload_threshold_chars": 0, "preview_head_chars": 1, "preview_tail_chars": 1}
    ctx = make_ctx(messages, policy(tool_results=settings))
    step = offload(ctx)
    assert step.plan(ctx).costs == [ctx.unit_cost(0), ctx.unit_cost(1)]
    out = step.rewrite(ctx, [0, 1])
    assert out.edits == [] and out.artifacts == {} and out.units == [] and out.tokens_freed == 0


def test_offload_text_parts_are_joined_and_replaced_by_a_string() -> None:
    parts = [{"type": "text", "text": ALPHA[:1000]}, {"type": "text", "text": ALPHA[1000:]}]
    messages = [user("go"), call("c", "read_file"), result("c", parts)]
    ctx = offload_ctx(messages)
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
    ctx = offload_ctx(messages)
    out = offload(ctx).rewrite(ctx, [1])
    assert [(e.index, e.artifact_id) for e in out.edits] == [
        (2, artifact_id(GAMMA)),
        (3, artifact_id(ALPHA)),
    ]
    metas = {a.content: a.meta for a in out.artifacts.values()}
    assert metas[GAMMA]["tool"] == "grep" and metas[GAMMA]["tool_call_id"] == "p2"
    assert metas[ALPHA]["tool"] == "read_file" and metas[ALPHA]["tool_call_id"] == "p1"


NON_REDUCIBLE = [
    pytest.param({"tool_results": {"exclude_tools": ["gr?p"]}}, id="excluded-glob"),
    pytest.param({"protect": {"pinned": [{"role": "tool", "contains": "gamma:"}]}}, id="pinned"),
    pytest.param(
        {"protect": {"pinned": [{"role": "assistant", "contains": "Searching"}]}},
        id="pinned-call",
    ),
]


@pytest.mark.parametrize("sections", NON_REDUCIBLE)
@pytest.mark.parametrize("make_step", [offload, clear])
def test_excluded_and_pinned_results_are_untouched(make_step: Any, sections: Any) -> None:
    ctx = offload_ctx(**sections)
    step = make_step(ctx)
    plan = step.plan(ctx)
    assert plan.costs[7] == ctx.unit_cost(7)  # the grep exchange
    assert plan.costs[1] < ctx.unit_cost(1)  # the read_file one still is reduced
    out = step.rewrite(ctx, list(range(9)))
    assert 11 not in [e.index for e in out.edits]
    assert 7 not in out.units and 1 in out.units


@pytest.mark.parametrize("make_step", [offload, clear])
def test_proxy_written_and_non_text_results_are_untouched(make_step: Any) -> None:
    written = f"{MARKER}: tool result cleared to save context (9000 chars). {ALPHA}]"
    image = [{"type": "text", "text": ALPHA}, {"type": "image_url", "image_url": {"url": "x"}}]
    messages = [
        user("go"),
        call("c1", "read_file"),
        result("c1", written),
        call("c2", "read_file"),
        result("c2", image),
        call("c3", "read_file"),
        result("c3", None),
    ]
    ctx = offload_ctx(messages, protect={"recent_tool_exchanges": 0})
    step = make_step(ctx)
    assert step.plan(ctx).costs == [ctx.unit_cost(u) for u in range(4)]
    assert step.rewrite(ctx, [0, 1, 2, 3]).edits == []


@pytest.mark.parametrize("make_step", [offload, clear])
def test_legacy_function_results_use_the_message_name(make_step: Any) -> None:
    messages = [
        user("go"),
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": ALPHA},
    ]
    ctx = offload_ctx(messages, protect={"recent_tool_exchanges": 0})
    out = make_step(ctx).rewrite(ctx, [1])
    [edit] = out.edits
    assert edit.index == 2
    assert edit.message["name"] == "f" and edit.message["role"] == "function"  # type: ignore[index]
    assert out.artifacts[artifact_id(ALPHA)].meta["tool"] == "f"
    excluded = offload_ctx(
        messages, protect={"recent_tool_exchanges": 0}, tool_results={"exclude_tools": ["f"]}
    )
    assert make_step(excluded).rewrite(excluded, [1]).edits == []


@pytest.mark.parametrize("make_step", [offload, clear])
def test_excluded_tool_is_resolved_per_exchange_when_call_ids_repeat(make_step: Any) -> None:
    # Some OpenAI-compatible servers number tool calls per response ("call_0" every turn).
    messages = [
        user("go"),
        call("call_0", "get_spec"),
        result("call_0", ALPHA),
        assistant("ok"),
        user("more"),
        call("call_0", "read_file"),
        result("call_0", GAMMA),
        assistant("ok"),
    ]
    ctx = offload_ctx(
        messages,
        protect={"recent_tool_exchanges": 0},
        tool_results={"exclude_tools": ["get_spec"]},
    )
    out = make_step(ctx).rewrite(ctx, list(range(len(ctx.units))))
    assert [e.index for e in out.edits] == [6]  # get_spec's result (index 2) is excluded


# ---------------------------------------------------------------- clear_tool_results


@pytest.mark.parametrize(
    ("keep", "limits"),
    [
        # exchanges are units 1, 4 and 7
        (0, [1, 2, 3, 4, 5, 6, 7, 8, 9]),
        (1, [0, 0, 0, 0, 4, 4, 4, 7, 7]),
        (2, [0, 0, 0, 0, 0, 0, 0, 4, 4]),
        (3, [0] * 9),
        (5, [0] * 9),
    ],
)
def test_clear_limits_protect_the_recent_tool_exchanges(keep: int, limits: list[int]) -> None:
    ctx = offload_ctx(protect={"recent_tool_exchanges": keep})
    plan = clear(ctx).plan(ctx)
    assert plan.limits == limits
    assert plan.rank == 2 and plan.cuts is None and plan.extra_cost == 0 and plan.target is None


def test_clear_plan_costs_and_at_least() -> None:
    ctx = offload_ctx(tool_results={"clear_at_least": 777})
    plan = clear(ctx).plan(ctx)
    assert plan.at_least == 777
    expected = [ctx.unit_cost(u) for u in range(9)]
    for u, (index, text, name, _) in TOOL_UNITS.items():
        cleared = placeholder(artifact_id(text), len(text), name, False)
        expected[u] = replaced_cost(ctx, u, index, cleared)
    assert plan.costs == expected
    # "tiny" is shorter than any placeholder: clearing it would cost more, so it is kept
    assert plan.costs[4] == ctx.unit_cost(4)


def test_clear_rewrite_edits_and_refetchable_tools() -> None:
    messages = tool_history()
    before = copy.deepcopy(messages)
    ctx = offload_ctx(messages, tool_results={"refetchable_tools": ["read_*"]})
    step = clear(ctx)
    plan = step.plan(ctx)
    out = step.rewrite(ctx, list(range(9)))
    assert out.units == [1, 7]
    alpha = placeholder(artifact_id(ALPHA), len(ALPHA), "read_file", refetchable=True)
    gamma = placeholder(artifact_id(GAMMA), len(GAMMA), "grep", refetchable=False)
    assert "or call read_file again" in alpha and "again" not in gamma
    assert out.edits == [
        Edit("replace", 3, with_content(messages[3], alpha), artifact_id(ALPHA)),
        Edit("replace", 11, with_content(messages[11], gamma), artifact_id(GAMMA)),
    ]
    assert out.artifacts[artifact_id(GAMMA)] == NewArtifact(
        GAMMA, "tool_result", {"tool": "grep", "tool_call_id": "c2", "step": "clear_tool_results"}
    )
    assert out.tokens_freed == sum(ctx.unit_cost(u) - plan.costs[u] for u in (1, 7)) > 0
    assert messages == before


def test_clear_and_offload_share_an_artifact_id_for_the_same_text() -> None:
    ctx = offload_ctx()
    cleared = clear(ctx).rewrite(ctx, [1]).artifacts
    offloaded = offload(ctx).rewrite(ctx, [1]).artifacts
    assert list(cleared) == list(offloaded) == [artifact_id(ALPHA)]
    assert cleared[artifact_id(ALPHA)].content == offloaded[artifact_id(ALPHA)].content


# ---------------------------------------------------------------- drop_turns


def turn_history() -> list[dict[str, Any]]:
    """Four turns; turn_first_unit = [0, 2, 5, 7]."""
    return [
        system(),  # 0
        user("Task: write the report."),  # 1  u0 turn 0 (first user: protected)
        assistant("Starting. Ünïcode ✓"),  # 2  u1
        user("Look up the data.\nTwo lines."),  # 3  u2 turn 1
        call("d1", "lookup", '{"q": "data"}'),  # 4  u3 (4-5)
        result("d1", "rows: 1, 2, 3", name="lookup"),  # 5
        assistant("Found 3 rows."),  # 6  u4
        user("Summarise."),  # 7  u5 turn 2
        assistant("Summary: three rows."),  # 8  u6
        user("Polish it."),  # 9  u7 turn 3
        assistant("Polished."),  # 10 u8
    ]


def drop_ctx(**sections: Any) -> tuple[PrepareContext, DropTurns]:
    config = sections.pop("config", DropTurnsConfig())
    allowance = sections.pop("allowance", 10_000)
    ctx = make_ctx(turn_history(), policy(**sections), allowance=allowance)
    return ctx, DropTurns(config, ctx)


def test_context_turn_layout() -> None:
    ctx, _ = drop_ctx()
    assert ctx.turn_first_unit == [0, 2, 5, 7]
    assert ctx.unit_turn == [0, 0, 1, 1, 1, 2, 2, 3, 3]
    assert ctx.first_user_unit == 0


@pytest.mark.parametrize(
    ("recent_turns", "limits"),
    [
        (0, [0, 0, 2, 2, 2, 5, 5, 7, 7]),  # the current turn always stays
        (1, [0, 0, 2, 2, 2, 5, 5, 7, 7]),
        (2, [0, 0, 0, 0, 0, 2, 2, 5, 5]),
        (3, [0, 0, 0, 0, 0, 0, 0, 2, 2]),
        (9, [0] * 9),
    ],
)
def test_drop_limits_protect_the_recent_turns(recent_turns: int, limits: list[int]) -> None:
    ctx, step = drop_ctx(protect={"recent_turns": recent_turns})
    plan = step.plan(ctx)
    assert plan.limits == limits
    assert plan.cuts == [2, 5, 7]  # turn starts only
    assert plan.rank == 3 and plan.at_least == 0


def test_drop_cuts_include_the_first_user_turn_after_a_leading_turn() -> None:
    messages = [system(), assistant("Hello!"), user("Task."), assistant("Ok."), user("More.")]
    ctx = make_ctx(messages)
    assert ctx.turn_first_unit == [0, 1, 3] and ctx.first_user_unit == 1
    plan = DropTurns(DropTurnsConfig(), ctx).plan(ctx)
    assert plan.cuts == [1, 3]
    assert plan.costs == [0, ctx.unit_cost(1), 0, 0]


def test_drop_costs_keep_protected_units_only() -> None:
    ctx, step = drop_ctx(protect={"pinned": [{"name": "lookup"}]})
    costs = step.plan(ctx).costs
    assert costs == [ctx.unit_cost(0), 0, 0, ctx.unit_cost(3), 0, 0, 0, 0, 0]
    ctx, step = drop_ctx(protect={"first_user": False})
    assert step.plan(ctx).costs == [0] * 9


def test_drop_extra_cost_is_a_notice_sized_for_the_widest_numbers() -> None:
    ctx, step = drop_ctx()
    plan = step.plan(ctx)
    widest = notice_message("user", True, 10**9, 10**9, artifact_id("sizing"))
    assert plan.extra_cost == counter().count_message(widest)
    real = notice_message("user", True, 3, 123_456, artifact_id("some archive"))
    assert counter().count_message(real) <= plan.extra_cost
    # the role and the read-tool wording are sized too
    ctx, step = drop_ctx(
        config=DropTurnsConfig(notice_role="developer"), read_tool={"enabled": False}
    )
    widest = notice_message("developer", False, 10**9, 10**9, artifact_id("sizing"))
    assert step.plan(ctx).extra_cost == counter().count_message(widest)


@pytest.mark.parametrize(
    ("target", "allowance", "expected"),
    [
        (0.5, 10_000, 5_000),
        (0.25, 8_000, 2_000),
        (3_000, 10_000, 3_000),
        (50_000, 10_000, 10_000),  # tokens are capped at the allowance
        (None, 10_000, None),  # the budget's target
    ],
)
def test_drop_target(target: float | None, allowance: int, expected: int | None) -> None:
    ctx, step = drop_ctx(config=DropTurnsConfig(target=target), allowance=allowance)
    assert step.plan(ctx).target == expected


def json_lines(messages: list[dict[str, Any]]) -> str:
    return "\n".join(
        json.dumps(m, ensure_ascii=False, separators=(",", ":"), allow_nan=False) for m in messages
    )


def test_drop_rewrite_archives_exact_json_lines_behind_one_notice() -> None:
    ctx, step = drop_ctx()
    before = copy.deepcopy(ctx.messages)
    out = step.rewrite(ctx, [0, 1, 2, 3, 4])  # u0 is the task: it stays
    assert out.units == [1, 2, 3, 4]
    archive = json_lines(ctx.messages[2:7])
    assert len(archive.split("\n")) == 5  # one line per message, even with "\n" in content
    [(aid, artifact)] = out.artifacts.items()
    assert aid == artifact_id(archive)
    assert artifact == NewArtifact(
        archive, "dropped_turns", {"turns": 2, "messages": 5, "first_index": 2}
    )
    tokens = sum(ctx.message_costs[2:7])
    notice = notice_message("user", True, 2, tokens, aid)
    assert aid in notice["content"] and notice["content"].startswith(MARKER)
    assert f"({tokens} tokens)" in notice["content"]
    assert out.edits == [
        Edit("insert_before", 2, notice, aid),
        *(Edit("remove", i, None, aid) for i in range(2, 7)),
    ]
    assert out.tokens_freed == tokens - counter().count_message(notice)
    assert ctx.messages == before


def test_drop_rewrite_skips_pinned_units_and_archives_the_rest() -> None:
    ctx, step = drop_ctx(
        config=DropTurnsConfig(notice_role="system"),
        protect={"pinned": [{"role": "tool", "contains": "rows:"}]},
        read_tool={"enabled": False},
    )
    out = step.rewrite(ctx, [0, 1, 2, 3, 4, 5, 6])
    assert out.units == [1, 2, 4, 5, 6]
    kept_out = [2, 3, 6, 7, 8]
    archive = json_lines([ctx.messages[i] for i in kept_out])
    [aid] = out.artifacts
    assert out.artifacts[aid].content == archive
    assert out.artifacts[aid].meta == {"turns": 3, "messages": 5, "first_index": 2}
    assert [(e.kind, e.index) for e in out.edits] == [("insert_before", 2)] + [
        ("remove", i) for i in kept_out
    ]
    notice = out.edits[0].message
    assert notice is not None and notice["role"] == "system"
    assert "the operator's artifact endpoint" in notice["content"]
    assert "read_context_artifact" not in notice["content"]


def test_drop_rewrite_of_only_protected_units_does_nothing() -> None:
    ctx, step = drop_ctx(protect={"pinned": [{"contains": "Starting"}]})
    out = step.rewrite(ctx, [0, 1])
    assert out.edits == [] and out.artifacts == {} and out.units == [] and out.tokens_freed == 0


def test_drop_never_removes_a_previous_notice() -> None:
    messages = turn_history()
    notice = notice_message("user", True, 1, 99, "art_old")
    messages.insert(2, notice)  # a notice from an earlier preparation, after the task
    ctx = make_ctx(messages)
    step = DropTurns(DropTurnsConfig(), ctx)
    assert ctx.units[1].start == 2
    assert 1 in ctx.pinned_units
    out = step.rewrite(ctx, list(range(len(ctx.units))))
    assert 2 not in [e.index for e in out.edits]
    archive = out.artifacts[out.edits[0].artifact_id].content
    assert json_lines([notice]) not in archive
    assert archive == json_lines(messages[3:])


def test_drop_rewrite_is_deterministic() -> None:
    ctx, step = drop_ctx()
    ctx2, step2 = drop_ctx()
    assert step.rewrite(ctx, [1, 2, 3]) == step2.rewrite(ctx2, [1, 2, 3])
