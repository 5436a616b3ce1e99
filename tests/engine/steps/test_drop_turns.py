"""drop_turns: the oldest whole turns go, archived as one artifact behind one notice."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from context_harness import (
    artifact_id,
    assistant,
    call,
    counter,
    make_ctx,
    notice_message,
    policy,
    result,
    system,
    user,
)

from proxy.artifacts.store import NewArtifact
from proxy.engine.step_api import MARKER, Edit, PrepareContext
from proxy.engine.steps.drop_turns import DropTurns, DropTurnsConfig
from proxy.engine.tool_text import signed


def test_config_defaults_are_the_documented_ones() -> None:
    config = DropTurnsConfig()
    assert (config.keep_recent_turns, config.notice_role, config.target) == (1, "user", 0.5)
    assert config.relaxed() is None


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
    ctx, step = drop_ctx(config=DropTurnsConfig(keep_recent_turns=recent_turns))
    plan = step.plan(ctx)
    assert plan.limits == limits
    assert plan.cuts == [2, 5, 7]  # turn starts only
    assert plan.at_least == 0
    assert plan.keeps_from == limits[-1]  # the recent turns are never removed


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


@pytest.mark.parametrize(
    ("read_tool", "how"),
    [
        (True, "use search_context_artifact or read_context_artifact with this id to look"),
        (False, "use the operator's artifact endpoint to look"),
    ],
)
def test_drop_notice_tells_how_to_read_the_archive(read_tool: bool, how: str) -> None:
    ctx, step = drop_ctx(read_tool={"enabled": read_tool})
    out = step.rewrite(ctx, [1, 2, 3, 4])
    notice = out.edits[0].message
    assert notice is not None
    assert notice["content"] == signed(
        f"[ctxproxy: 2 earlier turn(s) ({out.tokens_freed + counter().count_message(notice)} "
        "tokens) were removed from this conversation to fit the context window. They are "
        f"archived as artifact {out.edits[0].artifact_id} (one JSON message per line); "
        f"{how} things up.]",
        ctx.own_text_mac,
    )
