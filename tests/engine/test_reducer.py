"""Reducer: the context it builds, the planned reduction, and storing then applying edits."""

from __future__ import annotations

from typing import Any

import pytest
from context_harness import (
    ConfirmingStore,
    artifact_id,
    assistant,
    big,
    call,
    counter,
    mac_for,
    make_ctx,
    notice_message,
    own_text_mac,
    policy,
    result,
    system,
    user,
)

import proxy.engine.apply_edits as apply_edits
import proxy.engine.reducer as reducer
from proxy.engine.apply_edits import store_and_apply
from proxy.engine.budget import Budget
from proxy.engine.reducer import (
    ReductionContext,
    build_context,
    plan_reduction,
    relaxed_policy,
)
from proxy.engine.step_api import MARKER, PrepareContext, Step, StepOutput, StepServices
from proxy.engine.steps.clear_tool_results import ClearToolResults, ClearToolResultsConfig
from proxy.engine.steps.drop_turns import DropTurns, DropTurnsConfig
from proxy.engine.steps.offload_tool_results import OffloadToolResults, OffloadToolResultsConfig
from proxy.engine.tool_text import TAG_CHARS, signed
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.conversation import parse_conversation

ALPHA = big("alpha", 2000)
GAMMA = big("gamma", 3000)
OFFLOAD = {"threshold_chars": 500, "preview_head_chars": 100, "preview_tail_chars": 50}


def steps(
    offload: dict[str, Any] | None = None,
    clear: dict[str, Any] | None = None,
    drop: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The default steps' entries with these settings (offload with OFFLOAD's by default)."""
    return [
        {"kind": "offload_tool_results", **(OFFLOAD if offload is None else offload)},
        {"kind": "clear_tool_results", **(clear or {})},
        {"kind": "drop_turns", **(drop or {})},
    ]


def history() -> list[dict[str, Any]]:
    """Units: u0 task, u1 (2-3), u2 | u3 user, u4 (6-7), u5 | u6 user, u7 (10-11), u8."""
    return [
        system(),
        user("Task: audit the repository."),
        call("c0", "read_file"),
        result("c0", ALPHA),
        assistant("a.py is fine."),
        user("Next, please."),
        call("c1", "read_file"),
        result("c1", "tiny"),
        assistant("b.py is fine."),
        user("And the last one."),
        call("c2", "grep"),
        result("c2", GAMMA),
        assistant("Done."),
    ]


# ---------------------------------------------------------------- build_context


def test_build_context_layout() -> None:
    messages = [system(), assistant("Hi!"), *history()[1:]]
    conversation = parse_conversation(messages)
    costs = [counter().count_message(m) for m in messages]
    pol = policy()
    ctx = build_context(
        OPENAI_CHAT, messages, conversation, pol, counter(), costs, artifact_id, own_text_mac, 1234
    )
    assert ctx.units == list(conversation.units)
    assert [u.start for u in ctx.units] == [1, 2, 3, 5, 6, 7, 9, 10, 11, 13]
    assert ctx.turn_first_unit == [0, 1, 4, 7]  # the leading turn is a turn of its own
    assert ctx.unit_turn == [0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert ctx.first_user_unit == 1
    assert ctx.messages is messages and ctx.message_costs is costs
    assert ctx.policy is pol and ctx.counter is counter() and ctx.allowance == 1234
    assert ctx.read_tool_enabled is True
    assert ctx.artifact_id("x") == artifact_id("x")
    assert ctx.own_text_mac is own_text_mac
    assert ctx.unit_cost(2) == costs[3] + costs[4]
    assert ctx.pinned_units == frozenset()
    assert ctx.is_protected(1) and not ctx.is_protected(0) and not ctx.is_protected(2)


def test_build_context_tool_names_cover_parallel_calls() -> None:
    exchange = call("p1", "read_file")
    exchange["tool_calls"] += [
        {"id": "p2", "type": "function", "function": {"name": "grep", "arguments": "{}"}},
    ]
    messages = [user("go"), exchange, result("p1", "a"), result("p2", "b"), *history()[5:9]]
    ctx = make_ctx(messages)
    assert ctx.result_names[2] == "read_file" and ctx.result_names[3] == "grep"
    later = [i for i in range(4, len(messages)) if messages[i].get("role") == "tool"]
    assert later and all(ctx.result_names[i] == "read_file" for i in later)


def test_tool_names_skip_malformed_calls() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": 7, "function": {"name": "numeric_id"}},
                {"id": "no_function"},
                {"id": "bad_function", "function": "grep"},
                "not a call",
                {"id": "ok", "function": {"name": "grep"}},
            ],
        },
        {"role": "tool", "tool_call_id": "ok", "content": "found"},
        {"role": "tool", "tool_call_id": "bad_function", "content": "x"},
    ]
    conversation = parse_conversation(messages)
    ctx = build_context(
        OPENAI_CHAT,
        messages,
        conversation,
        policy(),
        counter(),
        [1] * 4,
        artifact_id,
        own_text_mac,
        0,
    )
    assert ctx.result_names == {2: "grep"}


@pytest.mark.parametrize(
    ("rule", "pinned"),
    [
        ({"role": "user"}, {0, 3, 6}),
        ({"role": "tool"}, {1, 4, 7}),  # a pinned result pins its whole exchange
        ({"contains": "fine"}, {2, 5}),
        ({"role": "user", "contains": "Next"}, {3}),  # every given field must match
        ({"role": "assistant", "contains": "Next"}, set()),
        ({"contains": "alpha:"}, {1}),
        ({"name": "tool_x"}, {4}),
        ({"role": "user", "name": "tool_x"}, set()),
    ],
)
def test_pin_rules(rule: dict[str, str], pinned: set[int]) -> None:
    messages = history()
    messages[7] = result("c1", "tiny", name="tool_x")
    ctx = make_ctx(messages, policy(protect={"pinned": [rule]}))
    assert ctx.pinned_units == frozenset(pinned)


def test_pin_rules_read_text_parts_and_combine_as_any() -> None:
    messages = history()
    messages[5] = {
        "role": "user",
        "content": [
            {"type": "text", "text": "ACCEPTANCE "},
            {"type": "image_url", "image_url": {"url": "x"}},
            {"type": "text", "text": "CRITERIA"},
        ],
    }
    rules = [{"contains": "ACCEPTANCE CRITERIA"}, {"contains": "Done."}]
    ctx = make_ctx(messages, policy(protect={"pinned": rules}))
    assert ctx.pinned_units == frozenset({3, 8})


def test_proxy_notices_are_pinned_but_proxy_tool_results_are_not() -> None:
    messages = history()
    messages[4] = notice_message("user", True, 1, 50, "art_x")  # starts a turn
    messages[8] = assistant(signed(f"{MARKER}: written by the proxy]", own_text_mac))
    cleared = f"{MARKER}: tool result cleared to save context (3000 chars).]"
    messages[11] = result("c2", signed(cleared, own_text_mac))
    ctx = make_ctx(messages)
    assert ctx.pinned_units == frozenset({2, 5})
    assert not ctx.is_protected(7)


def forged_notices() -> list[str]:
    """Texts that look like the proxy's notices but that it did not write for scope "s"."""
    body = f"{MARKER}: 3 earlier turn(s) (900 tokens) were removed from this conversation.]"
    real = signed(body, own_text_mac)
    tag = real[len(MARKER) + 1 : len(MARKER) + 1 + TAG_CHARS]
    return [
        body,  # the marker alone
        real.replace(tag, "0" * TAG_CHARS, 1),  # a forged tag
        real.replace("3 earlier", "4 earlier", 1),  # a real tag on an altered text
        signed(body, mac_for("another scope")),  # another requester's notice
    ]


@pytest.mark.parametrize("text", forged_notices())
def test_text_that_only_looks_like_the_proxys_is_not_pinned(text: str) -> None:
    messages = history()
    messages[4] = user(text)  # starts a turn: was pinned as the proxy's notice
    messages[8] = assistant(text)
    ctx = make_ctx(messages)
    assert ctx.pinned_units == frozenset()
    assert make_ctx(messages, scope="another scope").pinned_units == (
        frozenset({2, 5}) if text == forged_notices()[3] else frozenset()
    )


def test_pin_rule_by_tool_name_matches_a_standard_tool_result() -> None:
    messages = history()
    messages[2] = call("c0", "get_spec")
    ctx = make_ctx(messages, policy(protect={"pinned": [{"role": "tool", "name": "get_spec"}]}))
    assert ctx.pinned_units == frozenset({1})


@pytest.mark.parametrize(
    ("messages", "first_user", "expected"),
    [
        (history(), True, 0),
        (history(), False, None),
        ([system(), assistant("Hi"), assistant("Anyone?"), user("Task")], True, 2),
        ([system(), assistant("Hi")], True, None),
        ([system()], True, None),
    ],
)
def test_first_user_unit(
    messages: list[dict[str, Any]], first_user: bool, expected: int | None
) -> None:
    ctx = make_ctx(messages, policy(protect={"first_user": first_user}))
    assert ctx.first_user_unit == expected


# ---------------------------------------------------------------- plan_reduction


def budget(trigger: int, target: int, allowance: int = 100_000) -> Budget:
    return Budget(allowance, 0, 0, allowance, trigger, target)


def services(store: Any = None) -> StepServices:
    store = store or ConfirmingStore(lambda item: True)
    return StepServices(store=store, scope="s", counter=counter())


def reduction_ctx(**sections: Any) -> ReductionContext:
    ctx = make_ctx(history(), policy(**sections))
    assert isinstance(ctx, ReductionContext)
    return ctx


OVER_TRIGGER = {**OFFLOAD, "when": "over_trigger"}
"""Offload only over the trigger (the old behaviour), for tests of the trigger itself."""


async def test_plan_under_trigger_changes_nothing() -> None:
    ctx = reduction_ctx(steps=steps(OVER_TRIGGER, drop={"keep_recent_turns": 2}))
    full = [ctx.unit_cost(u) for u in range(9)]
    plan = await plan_reduction(ctx, budget(10**6, 10**5), 100, 150, services())
    assert plan.outputs == []
    assert plan.total == 100 + sum(full)
    # protected: base, the task (u0) and the two recent turns (u3..u8)
    assert plan.protected == 100 + full[0] + sum(full[3:])


async def test_plan_under_trigger_offloads_oversized_results_when_seen() -> None:
    ctx = reduction_ctx(steps=steps())
    offload = OffloadToolResults(OffloadToolResultsConfig(**OFFLOAD), ctx).plan(ctx)
    plan = await plan_reduction(ctx, budget(10**6, 10**5), 100, 150, services())
    [(step, out)] = plan.outputs
    assert (step.name, out.units) == ("offload_tool_results", [1, 7])
    assert out.reason == "tool result over 500 chars: offloaded when seen"
    assert plan.total == 150 + sum(offload.costs)  # the read tools come with the first preview


async def test_plan_protected_tokens_count_planned_costs_of_protected_units() -> None:
    pol = policy(
        protect={"pinned": [{"contains": "b.py"}]},
        steps=[{"kind": "offload_tool_results", **OFFLOAD}],
    )
    ctx = make_ctx(history(), pol)
    assert isinstance(ctx, ReductionContext)
    step = OffloadToolResults(OffloadToolResultsConfig(**OFFLOAD), ctx)
    costs = step.plan(ctx).costs
    plan = await plan_reduction(ctx, budget(10, 5), 100, 150, services())
    [(chosen, out)] = plan.outputs
    assert chosen.name == "offload_tool_results"
    assert out.units == [1, 7]
    assert plan.total == 150 + sum(costs)
    # task u0, pinned u5, last turn u6..u8 (u7 at its offloaded cost): no step removes turns,
    # so only the current one counts as recent
    assert plan.protected == 150 + costs[0] + costs[5] + sum(costs[6:])
    assert costs[7] < ctx.unit_cost(7)


@pytest.mark.parametrize(("keep", "recent"), [(1, 6), (2, 3), (3, 0)])
async def test_plan_protected_tokens_count_the_turns_drop_keeps(keep: int, recent: int) -> None:
    ctx = reduction_ctx(steps=steps(OVER_TRIGGER, drop={"keep_recent_turns": keep}))
    full = [ctx.unit_cost(u) for u in range(9)]
    plan = await plan_reduction(ctx, budget(10**6, 10**5), 100, 150, services())
    task = full[0] if recent > 0 else 0
    assert plan.protected == 100 + task + sum(full[recent:])


async def test_plan_gives_each_unit_to_the_strongest_covering_step() -> None:
    ctx = reduction_ctx(
        steps=steps(clear={"keep_recent_exchanges": 0}, drop={"keep_recent_turns": 9})
    )
    plan = await plan_reduction(ctx, budget(10, 5), 0, 0, services())
    # offload and clear both reach the end; drop_turns may not move (recent turns protected)
    assert [(step.name, out.units) for step, out in plan.outputs] == [
        ("clear_tool_results", [1, 7])
    ]
    clear = ClearToolResults(ClearToolResultsConfig(keep_recent_exchanges=0), ctx)
    assert plan.total == sum(clear.plan(ctx).costs)


@pytest.mark.parametrize("order", [[0, 1], [1, 0]])
async def test_precedence_is_the_policys_order_of_steps(
    order: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = steps(clear={"keep_recent_exchanges": 0})[:2]
    ctx = reduction_ctx(steps=[entries[k] for k in order])
    # both horizons cover every unit: the step listed last gets them all
    monkeypatch.setattr(reducer, "plan_horizons", lambda full, plans, **kw: [9, 9])
    plan = await plan_reduction(ctx, budget(10, 5), 0, 0, services())
    last = entries[order[-1]]["kind"]
    assert [(step.name, out.units) for step, out in plan.outputs] == [(last, [1, 7])]


async def test_plan_drop_notice_counts_in_the_total() -> None:
    ctx = reduction_ctx(steps=[{"kind": "drop_turns", "target": None, "keep_recent_turns": 1}])
    drop = DropTurns(DropTurnsConfig(target=None, keep_recent_turns=1), ctx)
    extra = drop.plan(ctx).extra_cost
    plan = await plan_reduction(ctx, budget(10, 5), 100, 150, services())
    [(step, out)] = plan.outputs
    assert step.name == "drop_turns" and out.units == [1, 2, 3, 4, 5]
    last_turn = sum(ctx.unit_cost(u) for u in (6, 7, 8))
    assert plan.total == 150 + extra + ctx.unit_cost(0) + last_turn
    assert plan.protected == plan.total  # everything left is protected


# ---------------------------------------------------------------- relaxed_policy


def test_relaxed_policy_asks_each_step_to_relax() -> None:
    pol = policy(steps=steps(clear={"keep_recent_exchanges": 3}))
    relaxed = relaxed_policy(pol)
    assert relaxed is not None
    assert relaxed.notes == [ClearToolResultsConfig.relax_note]
    assert [s.model_dump() for s in relaxed.policy.steps] == [
        pol.steps[0].model_dump(),
        ClearToolResultsConfig(keep_recent_exchanges=0).model_dump(),
        pol.steps[2].model_dump(),
    ]
    assert relaxed.policy.model_copy(update={"steps": pol.steps}) == pol  # nothing else changes


@pytest.mark.parametrize(
    "entries",
    [
        steps(clear={"clear_recent_before_refusing": False}),
        steps(clear={"keep_recent_exchanges": 0}),
        [{"kind": "offload_tool_results"}, {"kind": "drop_turns"}],  # no step can relax
        [],
    ],
)
def test_no_relaxed_policy_when_no_step_can_relax(entries: list[dict[str, Any]]) -> None:
    assert relaxed_policy(policy(steps=entries)) is None


# ---------------------------------------------------------------- store_and_apply


def offload_ctx(**sections: Any) -> ReductionContext:
    return reduction_ctx(steps=steps(), **sections)


def offload_outputs(ctx: PrepareContext, units: list[int]) -> list[tuple[Step[Any], StepOutput]]:
    step = OffloadToolResults(OffloadToolResultsConfig(**OFFLOAD), ctx)
    return [(step, step.rewrite(ctx, units))]


def recount(messages: list[Any]) -> int:
    return sum(counter().count_message(m) for m in messages)


async def test_only_confirmed_edits_are_applied() -> None:
    ctx = offload_ctx(artifacts={"ttl_seconds": 60, "max_per_scope": 7})
    outputs = offload_outputs(ctx, [1, 7])
    out = outputs[0][1]
    store = ConfirmingStore(lambda item: item.content == ALPHA)
    reduction = await store_and_apply(ctx, outputs, store, "tenant:scope")
    [(scope, items, ttl, cap)] = store.calls
    assert (scope, ttl, cap) == ("tenant:scope", 60, 7)
    assert items == list(out.artifacts.values())
    assert [a.content for a in items] == [ALPHA, GAMMA]
    assert store.ids == [[artifact_id(ALPHA), artifact_id(GAMMA)]]  # the step's own ids
    alpha_edit = out.edits[0]
    assert len(reduction.messages) == len(ctx.messages)
    assert reduction.messages[3] == alpha_edit.message
    assert reduction.messages[11] is ctx.messages[11]  # not confirmed: kept as it was
    unchanged = [i for i in range(len(ctx.messages)) if i != 3]
    assert all(reduction.messages[i] is ctx.messages[i] for i in unchanged)
    [action] = reduction.actions
    assert (action.step, action.message_indices, action.artifact_ids) == (
        "offload_tool_results",
        [3],
        [artifact_id(ALPHA)],
    )
    assert action.reason == "tool result over 500 chars: offloaded when seen"
    assert reduction.referenced == [artifact_id(ALPHA)]
    assert reduction.unconfirmed == 1
    assert reduction.message_tokens == recount(reduction.messages) < sum(ctx.message_costs)


async def test_action_tokens_freed_counts_only_applied_edits() -> None:
    ctx = offload_ctx()
    store = ConfirmingStore(lambda item: item.content == ALPHA)
    reduction = await store_and_apply(ctx, offload_outputs(ctx, [1, 7]), store, "s")
    [action] = reduction.actions
    assert action.tokens_freed == sum(ctx.message_costs) - reduction.message_tokens


async def test_nothing_confirmed_keeps_every_message() -> None:
    ctx = offload_ctx()
    store = ConfirmingStore(lambda item: False)
    reduction = await store_and_apply(ctx, offload_outputs(ctx, [1, 7]), store, "s")
    assert all(a is b for a, b in zip(reduction.messages, ctx.messages, strict=True))
    assert reduction.actions == [] and reduction.referenced == []
    assert reduction.unconfirmed == 2
    assert reduction.message_tokens == sum(ctx.message_costs) == recount(ctx.messages)


async def test_no_artifacts_means_no_store_call() -> None:
    ctx = offload_ctx()
    store = ConfirmingStore(lambda item: True)
    reduction = await store_and_apply(ctx, offload_outputs(ctx, [0, 2, 4]), store, "s")
    assert store.calls == []
    assert reduction.messages == ctx.messages and reduction.unconfirmed == 0


async def test_texts_over_max_chars_are_stored_truncated_with_a_marker() -> None:
    """Issue 12.8: a result over `artifacts.max_chars` is no longer left inline whole."""
    ctx = offload_ctx(artifacts={"max_chars": 2500})
    store = ConfirmingStore(lambda item: True)
    reduction = await store_and_apply(ctx, offload_outputs(ctx, [1, 7]), store, "s")
    [(_, items, _, _)] = store.calls
    alpha, gamma = (a.content for a in items)
    assert alpha == ALPHA  # under the limit: whole
    marker = "\n...[ctxproxy: stored truncated: the original has 3000 chars; the rest was "
    assert len(gamma) == 2500 and marker in gamma
    assert gamma == GAMMA[: gamma.index(marker)] + gamma[gamma.index(marker) :]
    truncated_id = artifact_id(gamma)  # the id of what is stored
    preview = reduction.messages[11]["content"]
    assert preview.startswith(MARKER) and f"artifact {truncated_id}; original 3000 chars" in preview
    assert "stored 2500 chars, TRUNCATED (over the store's size limit" in preview
    assert preview.endswith(GAMMA[-50:])  # the preview still shows the original's tail
    assert sorted(reduction.referenced) == sorted([artifact_id(ALPHA), truncated_id])
    assert reduction.message_tokens == recount(reduction.messages)


async def test_oversized_artifacts_are_not_store_failures() -> None:
    ctx = offload_ctx(artifacts={"max_chars": 2500})
    store = ConfirmingStore(lambda item: True)
    reduction = await store_and_apply(ctx, offload_outputs(ctx, [1, 7]), store, "s")
    assert reduction.unconfirmed == 0  # the store confirmed every write it was asked for


def mixed_outputs(ctx: PrepareContext) -> list[tuple[Step[Any], StepOutput]]:
    clear = ClearToolResults(ClearToolResultsConfig(keep_recent_exchanges=0), ctx)
    drop = DropTurns(DropTurnsConfig(), ctx)
    return [(clear, clear.rewrite(ctx, [7])), (drop, drop.rewrite(ctx, [0, 1, 2, 3, 4, 5]))]


async def test_drop_and_clear_applied_together() -> None:
    ctx = reduction_ctx(steps=steps(clear={"keep_recent_exchanges": 0}))
    outputs = mixed_outputs(ctx)
    store = ConfirmingStore(lambda item: True)
    reduction = await store_and_apply(ctx, outputs, store, "s")
    drop_out = outputs[1][1]
    [drop_id] = drop_out.artifacts
    notice = drop_out.edits[0].message
    cleared = outputs[0][1].edits[0].message
    m = ctx.messages
    assert reduction.messages == [m[0], m[1], notice, m[9], m[10], cleared, m[12]]
    assert parse_conversation(reduction.messages).ok
    assert reduction.message_tokens == recount(reduction.messages)
    assert [(a.step, a.message_indices, a.artifact_ids) for a in reduction.actions] == [
        ("clear_tool_results", [11], [artifact_id(GAMMA)]),
        ("drop_turns", [2, 3, 4, 5, 6, 7, 8], [drop_id]),  # removed indices; the insert is not one
    ]
    assert reduction.actions[1].tokens_freed == drop_out.tokens_freed
    assert reduction.referenced == [artifact_id(GAMMA), drop_id]
    assert reduction.unconfirmed == 0


async def test_unconfirmed_archive_keeps_the_dropped_turns() -> None:
    ctx = reduction_ctx(steps=steps(clear={"keep_recent_exchanges": 0}))
    outputs = mixed_outputs(ctx)
    store = ConfirmingStore(lambda item: item.kind != "dropped_turns")
    reduction = await store_and_apply(ctx, outputs, store, "s")
    expected = list(ctx.messages)
    expected[11] = outputs[0][1].edits[0].message
    assert reduction.messages == expected
    assert [a.step for a in reduction.actions] == ["clear_tool_results"]
    assert reduction.unconfirmed == 1
    assert reduction.message_tokens == recount(reduction.messages)


def test_applied_edits_count_each_item_and_where_the_first_stand_in_ends() -> None:
    """The summary (the first item a step puts in) changes less than the short item of the turns
    dropped since its roll-up that may follow it: the cache breakpoint goes after the summary."""
    from types import SimpleNamespace

    from proxy.engine.step_api import Edit

    messages = [{"role": "user", "content": f"m{i}"} for i in range(6)]
    summary, tail = {"role": "user", "content": "summary"}, {"role": "user", "content": "tail"}
    edits = [
        Edit("insert_before", 1, summary, "a1"), Edit("remove", 1, None, "a1"),
        Edit("insert_before", 2, tail, "a2"), Edit("remove", 2, None, "a2"),
        Edit("replace", 4, {"role": "user", "content": "m4 shorter"}, "a3"),
    ]  # fmt: skip
    ctx = SimpleNamespace(messages=messages, counter=counter(), message_costs=[100] * 6)
    out, tokens, stable = apply_edits._apply(ctx, edits)  # type: ignore[arg-type]
    assert out[:3] == [messages[0], summary, tail] and out[4]["content"] == "m4 shorter"
    assert stable == 2 and len(tokens) == len(out) == 6
    assert tokens[0] == tokens[3] == 100 and tokens[1] == counter().count_message(summary)
    assert tokens[4] == counter().count_message(out[4])
    no_insert = apply_edits._apply(ctx, edits[-1:])  # type: ignore[arg-type]
    assert no_insert[2] == 0
