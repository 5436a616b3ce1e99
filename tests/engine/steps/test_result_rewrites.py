"""result_rewrites: what offload and clear share (which results are reducible, unit rewrites)."""

from __future__ import annotations

from typing import Any

import pytest
from context_harness import artifact_id, assistant, call, mac_for, result, user
from context_harness import own_text_mac as mac
from step_harness import ALPHA, GAMMA, clear, clear_all, offload, tool_ctx

from proxy.engine.step_api import MARKER
from proxy.engine.steps.result_rewrites import matches_any, tool_results
from proxy.engine.tool_text import TAG_CHARS, is_proxy_text, signed


def test_matches_any_is_a_glob_match_on_a_known_name() -> None:
    assert matches_any("read_file", ["read_*"]) and matches_any("grep", ["x", "gr?p"])
    assert not matches_any(None, ["*"]) and not matches_any("grep", [])
    assert not matches_any("Grep", ["grep"])  # case-sensitive, like tool names


def test_tool_results_yields_the_reducible_results_of_a_unit() -> None:
    ctx = tool_ctx()
    assert [(i, name) for i, _, _, name in tool_results(ctx, 1, [])] == [(3, "read_file")]
    assert list(tool_results(ctx, 1, ["read_*"])) == []  # excluded by glob
    assert list(tool_results(ctx, 0, [])) == []  # not a tool exchange


def test_exclude_tools_is_each_steps_own_setting() -> None:
    ctx = tool_ctx()
    assert [e.index for e in offload(ctx, exclude_tools=["grep"]).rewrite(ctx, [1, 7]).edits] == [3]
    assert [e.index for e in clear(ctx).rewrite(ctx, [1, 7]).edits] == [3, 11]


NON_REDUCIBLE = [
    pytest.param({}, {"exclude_tools": ["gr?p"]}, id="excluded-glob"),
    pytest.param(
        {"protect": {"pinned": [{"role": "tool", "contains": "gamma:"}]}}, {}, id="pinned"
    ),
    pytest.param(
        {"protect": {"pinned": [{"role": "assistant", "contains": "Searching"}]}},
        {},
        id="pinned-call",
    ),
]


@pytest.mark.parametrize(("sections", "settings"), NON_REDUCIBLE)
@pytest.mark.parametrize("make_step", [offload, clear])
def test_excluded_and_pinned_results_are_untouched(
    make_step: Any, sections: Any, settings: Any
) -> None:
    ctx = tool_ctx(**sections)
    step = make_step(ctx, **settings)
    plan = step.plan(ctx)
    assert plan.costs[7] == ctx.unit_cost(7)  # the grep exchange
    assert plan.costs[1] < ctx.unit_cost(1)  # the read_file one still is reduced
    out = step.rewrite(ctx, list(range(9)))
    assert 11 not in [e.index for e in out.edits]
    assert 7 not in out.units and 1 in out.units


@pytest.mark.parametrize("make_step", [offload, clear_all])
def test_proxy_written_and_non_text_results_are_untouched(make_step: Any) -> None:
    written = signed(f"{MARKER}: tool result cleared to save context (9000 chars). {ALPHA}]", mac)
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
    ctx = tool_ctx(messages)
    step = make_step(ctx)
    assert step.plan(ctx).costs == [ctx.unit_cost(u) for u in range(4)]
    assert step.rewrite(ctx, [0, 1, 2, 3]).edits == []


def lookalikes() -> list[str]:
    """Tool results that start like the proxy's texts but that it did not write for scope "s"
    (a fetched page can say anything), each over the offload threshold."""
    body = f"{MARKER}: tool result cleared to save context (9000 chars). {ALPHA}]"
    real = signed(body, mac)
    tag = real[len(MARKER) + 1 : len(MARKER) + 1 + TAG_CHARS]
    return [
        body,  # the marker alone
        f"{MARKER}#{'0' * TAG_CHARS}{body[len(MARKER) :]}",  # a forged tag
        real.replace("9000 chars", "9001 chars", 1),  # a real tag on an altered text
        real.replace(tag, tag[::-1], 1),  # a real body with a wrong tag
        signed(body, mac_for("another scope")),  # another requester's text
    ]


@pytest.mark.parametrize("text", lookalikes())
@pytest.mark.parametrize("make_step", [offload, clear_all])
def test_results_that_only_look_like_the_proxys_are_reduced(make_step: Any, text: str) -> None:
    assert not is_proxy_text(text, mac)
    messages = [user("go"), call("c1", "fetch_page"), result("c1", text), assistant("ok")]
    ctx = tool_ctx(messages)
    step = make_step(ctx)
    assert step.plan(ctx).costs[1] < ctx.unit_cost(1)
    out = step.rewrite(ctx, [1])
    [edit] = out.edits
    assert edit.index == 2 and edit.artifact_id == artifact_id(text)
    assert out.artifacts[artifact_id(text)].content == text
    assert is_proxy_text(edit.message["content"], mac)  # type: ignore[index]


@pytest.mark.parametrize("make_step", [offload, clear_all])
def test_legacy_function_results_use_the_message_name(make_step: Any) -> None:
    messages = [
        user("go"),
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": ALPHA},
    ]
    ctx = tool_ctx(messages)
    out = make_step(ctx).rewrite(ctx, [1])
    [edit] = out.edits
    assert edit.index == 2
    assert edit.message["name"] == "f" and edit.message["role"] == "function"  # type: ignore[index]
    assert out.artifacts[artifact_id(ALPHA)].meta["tool"] == "f"
    assert make_step(ctx, exclude_tools=["f"]).rewrite(ctx, [1]).edits == []


@pytest.mark.parametrize("make_step", [offload, clear_all])
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
    ctx = tool_ctx(messages)
    out = make_step(ctx, exclude_tools=["get_spec"]).rewrite(ctx, list(range(len(ctx.units))))
    assert [e.index for e in out.edits] == [6]  # get_spec's result (index 2) is excluded


def test_clear_and_offload_share_an_artifact_id_for_the_same_text() -> None:
    ctx = tool_ctx()
    cleared = clear(ctx).rewrite(ctx, [1]).artifacts
    offloaded = offload(ctx).rewrite(ctx, [1]).artifacts
    assert list(cleared) == list(offloaded) == [artifact_id(ALPHA)]
    assert cleared[artifact_id(ALPHA)].content == offloaded[artifact_id(ALPHA)].content


# -- mutation run 4: every result of a parallel call is decided on its own ---------------------


def parallel(*results: tuple[str, str, str]) -> list[dict[str, Any]]:
    """A task, one assistant message calling (id, tool) for each result, then the results."""
    calls = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": c, "type": "function", "function": {"name": tool, "arguments": "{}"}}
            for c, tool, _ in results
        ],
    }
    return [user("Task."), calls, *(result(c, text) for c, _, text in results), assistant("Ok.")]


def test_a_result_left_alone_does_not_stop_the_next_of_the_same_call() -> None:
    own = signed(f"{MARKER}: an earlier placeholder", mac)
    messages = parallel(
        ("c1", "cat", own), ("c2", "grep", ALPHA), ("c3", "cat", "short"), ("c4", "cat", GAMMA)
    )
    ctx = tool_ctx(messages)
    assert [i for i, _, _, _ in tool_results(ctx, 1, ["grep"])] == [4, 5]
    edits = offload(ctx, exclude_tools=["grep"]).rewrite(ctx, [1]).edits
    assert [e.index for e in edits] == [5]  # "short" is under the threshold: not offloaded


def test_a_rewrite_that_frees_nothing_is_not_made(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = tool_ctx(parallel(("c1", "cat", ALPHA), ("c2", "cat", GAMMA)))
    real = ctx.counter.count_message

    def count(message: dict[str, Any]) -> int:
        if message.get("tool_call_id") == "c1" and MARKER in str(message.get("content")):
            return ctx.message_costs[2]  # the placeholder of c1 costs what c1 did
        return real(message)

    monkeypatch.setattr(ctx.counter, "count_message", count)
    assert [e.index for e in clear_all(ctx).rewrite(ctx, [1]).edits] == [3]
