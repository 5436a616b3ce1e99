"""clear_tool_results: older tool results become a placeholder naming the stored original."""

from __future__ import annotations

import copy

import pytest
from context_harness import artifact_id, assistant, call, own_text_mac, result, system, user
from step_harness import ALPHA, GAMMA, TOOL_UNITS, clear, replaced_cost, tool_ctx, tool_history

from proxy.artifacts.store import NewArtifact
from proxy.engine.step_api import Edit
from proxy.engine.steps.clear_tool_results import ClearToolResults, ClearToolResultsConfig
from proxy.engine.tool_text import StoredText, placeholder, preview
from proxy.formats.openai_chat.fields import with_content


def test_config_defaults_are_the_documented_ones() -> None:
    config = ClearToolResultsConfig()
    assert config.keep_recent_exchanges == 1 and config.clear_at_least == 0
    assert config.exclude_tools == [] and config.refetchable_tools == []
    assert config.clear_recent_before_refusing is True


def test_relaxed_keeps_no_recent_exchange_and_previews_the_protected_ones() -> None:
    config = ClearToolResultsConfig(keep_recent_exchanges=3, clear_at_least=5)
    relaxed = config.relaxed()
    assert relaxed is not None and relaxed.model_dump() == {
        **config.model_dump(),
        "keep_recent_exchanges": 0,
    }
    assert (relaxed.previewed_recent, config.previewed_recent) == (3, 0)
    assert "recent exchanges were offloaded behind short previews" in config.relax_note
    assert (config.recent_preview_head_chars, config.recent_preview_tail_chars) == (500, 200)


def test_the_last_resort_never_blanks_the_newest_result() -> None:
    """Issue 12.7: relaxed, the newest exchange's result becomes a preview (its head and tail
    visible, the whole stored), not a bare placeholder; older results are cleared as before."""
    messages = tool_history()
    ctx = tool_ctx(messages)
    relaxed = ClearToolResultsConfig(keep_recent_exchanges=1).relaxed()
    assert relaxed is not None
    step = ClearToolResults(relaxed, ctx)
    out = step.rewrite(ctx, list(range(9)))
    assert out.units == [1, 7]
    alpha, gamma = (edit.message["content"] for edit in out.edits)  # type: ignore[index]
    assert alpha == placeholder(artifact_id(ALPHA), len(ALPHA), "read_file", False, own_text_mac)
    assert gamma == preview(
        StoredText(artifact_id(GAMMA), GAMMA, len(GAMMA)),
        GAMMA,
        ctx.message_costs[11],
        500,
        200,
        True,
        own_text_mac,
    )
    omitted = len(GAMMA) - 700
    assert gamma.endswith(f"\n{GAMMA[:500]}\n...[truncated {omitted} chars]...\n{GAMMA[-200:]}")
    assert out.artifacts[artifact_id(GAMMA)].content == GAMMA
    # a recent result that head and tail would show whole is kept as it is
    short = ClearToolResults(relaxed.model_copy(update={"recent_preview_head_chars": 3000}), ctx)
    assert [e.index for e in short.rewrite(ctx, list(range(9))).edits] == [3]


@pytest.mark.parametrize(
    "config",
    [
        ClearToolResultsConfig(clear_recent_before_refusing=False),
        ClearToolResultsConfig(keep_recent_exchanges=0),  # nothing left to relax
    ],
)
def test_nothing_to_relax(config: ClearToolResultsConfig) -> None:
    assert config.relaxed() is None


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
    ctx = tool_ctx()
    plan = clear(ctx, keep_recent_exchanges=keep).plan(ctx)
    assert plan.limits == limits
    assert plan.cuts is None and plan.extra_cost == 0 and plan.target is None
    assert plan.keeps_from is None  # shrinks results, removes no unit


def test_clear_plan_costs_and_at_least() -> None:
    ctx = tool_ctx()
    plan = clear(ctx, clear_at_least=777).plan(ctx)
    assert plan.at_least == 777
    expected = [ctx.unit_cost(u) for u in range(9)]
    for u, (index, text, name, _) in TOOL_UNITS.items():
        cleared = placeholder(artifact_id(text), len(text), name, False, own_text_mac)
        expected[u] = replaced_cost(ctx, u, index, cleared)
    assert plan.costs == expected
    # "tiny" is shorter than any placeholder: clearing it would cost more, so it is kept
    assert plan.costs[4] == ctx.unit_cost(4)


def test_clear_rewrite_edits_and_refetchable_tools() -> None:
    messages = tool_history()
    before = copy.deepcopy(messages)
    ctx = tool_ctx(messages)
    step = clear(ctx, refetchable_tools=["read_*"])
    plan = step.plan(ctx)
    out = step.rewrite(ctx, list(range(9)))
    assert out.units == [1, 7]
    alpha = placeholder(artifact_id(ALPHA), len(ALPHA), "read_file", True, own_text_mac)
    gamma = placeholder(artifact_id(GAMMA), len(GAMMA), "grep", False, own_text_mac)
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


def test_a_result_stored_truncated_says_so_in_its_placeholder() -> None:
    """Mutation run 4: a result over the store's `artifacts.max_chars` is stored cut, and its
    placeholder names how much was kept."""
    ctx = tool_ctx(artifacts={"max_chars": 500})
    out = clear(ctx, keep_recent_exchanges=0).rewrite(ctx, TOOL_UNITS)
    first = out.edits[0]
    assert first.message is not None
    stored = out.artifacts[first.artifact_id].content
    assert len(stored) > 500 - 100  # the head of the result and a marker
    assert f"(stored truncated to {len(stored)} chars)" in first.message["content"]


def test_a_cleared_result_keeps_the_facts_it_stated_at_present() -> None:
    """A fact a tool result stated stays inline in its placeholder (quoted); one a later turn
    corrected is named with its current value beside it."""
    record = ('{\n  "id": "R1",\n  "notes": "For the record, the latency objective of HULMIRCOR '
              'is 217 ms. For the record, the owner of Blue Falcon is Jane Doe.",\n  "log": "'
              + " ".join(f"line {n} ok" for n in range(300)) + '"\n}')
    messages = [
        system(), user("Task: look up records."),
        call("c0", "lookup", '{"id": "R1"}'), result("c0", record), assistant("Noted."),
        user("Correction on Blue Falcon: its owner changed. Please use Maria Lopez from now "
             "on; the earlier figure Jane Doe is out of date."),
        call("c1", "lookup", '{"id": "R2"}'), result("c1", "{}"), assistant("Done."),
    ]
    ctx = tool_ctx(messages)
    out = clear(ctx).rewrite(ctx, [1])
    [edit] = out.edits
    content = edit.message["content"]  # type: ignore[index]
    assert content == placeholder(
        artifact_id(record), len(record), "lookup", False, own_text_mac,
        facts=["latency objective of HULMIRCOR: 217 ms",
               "owner of Blue Falcon: Maria Lopez (was Jane Doe, corrected at turn 2)"],
    )
    assert content.endswith(
        "- latency objective of HULMIRCOR: 217 ms\n"
        "- owner of Blue Falcon: Maria Lopez (was Jane Doe, corrected at turn 2)"
    )
