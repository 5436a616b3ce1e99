"""condense_tool_results: machine-made tool results rewritten exactly, the original stored."""

from __future__ import annotations

import json
from typing import Any

from context_harness import artifact_id, assistant, call, make_ctx, policy, result, user

from proxy.engine.condense_text import minify
from proxy.engine.step_api import PrepareContext
from proxy.engine.steps.condense_tool_results import (
    CondenseToolResults,
    CondenseToolResultsConfig,
)
from proxy.engine.tool_text import is_proxy_text
from proxy.formats.openai_chat import OPENAI_CHAT

ROWS = [{"id": i, "name": f"user{i}", "email": f"u{i}@example.com"} for i in range(60)]
TABLE = json.dumps(ROWS, indent=2)
LOG = "\n".join(f"[{i:03d}] test_case_{i} PASSED" for i in range(80))
PROSE = "The quick brown fox jumps over the lazy dog. " * 60


def history(*results: tuple[str, str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [user("task")]
    for n, (name, text) in enumerate(results):
        messages += [call(f"c{n}", name), result(f"c{n}", text)]
    return [*messages, assistant("done")]


def step(ctx: PrepareContext, **settings: Any) -> CondenseToolResults:
    return CondenseToolResults(CondenseToolResultsConfig(**settings), ctx)


def test_defaults_are_the_documented_ones() -> None:
    config = CondenseToolResultsConfig()
    assert (config.min_chars, config.tools, config.exclude_tools) == (1000, ["*"], [])
    assert (config.transforms, config.min_saving) == (["json", "table", "lines"], 0.2)


def test_a_table_and_a_log_are_condensed_the_original_stored_and_named() -> None:
    ctx = make_ctx(history(("list_users", TABLE), ("run_tests", LOG), ("read", PROSE)))
    s = step(ctx)
    plan = s.plan(ctx)
    assert plan.when_seen and plan.limits == [t + 1 for t in range(len(ctx.units))]
    out = s.rewrite(ctx, list(range(len(ctx.units))))
    assert [e.index for e in out.edits] == [2, 4]  # the prose is not machine-made
    for edit, original in zip(out.edits, (TABLE, LOG), strict=True):
        assert edit.artifact_id == artifact_id(original)
        assert out.artifacts[edit.artifact_id].content == original
        assert edit.message is not None
        text = OPENAI_CHAT.result_text(edit.message)
        assert text is not None and is_proxy_text(text, ctx.own_text_mac)
        assert artifact_id(original) in text.split("\n", 1)[0]
        assert len(text) < len(original)
    body = OPENAI_CHAT.result_text(out.edits[0].message or {}) or ""
    assert body.split("\n", 2)[1] == "id|name|email"
    assert out.tokens_freed > 0 and out.reason


def test_settings_gate_what_is_condensed() -> None:
    ctx = make_ctx(history(("list_users", TABLE), ("run_tests", LOG)))
    units = list(range(len(ctx.units)))
    assert step(ctx, min_chars=len(TABLE) + 1).rewrite(ctx, units).edits == []
    assert [e.index for e in step(ctx, tools=["run_*"]).rewrite(ctx, units).edits] == [4]
    assert [e.index for e in step(ctx, exclude_tools=["run_*"]).rewrite(ctx, units).edits] == [2]
    assert [e.index for e in step(ctx, transforms=["lines"]).rewrite(ctx, units).edits] == [4]
    assert step(ctx, min_saving=0.99).rewrite(ctx, units).edits == []


def test_a_result_the_store_would_truncate_is_left_alone() -> None:
    pol = policy(artifacts={"max_chars": 1000})
    ctx = make_ctx(history(("list_users", TABLE)), pol)
    assert step(ctx).rewrite(ctx, list(range(len(ctx.units)))).edits == []


def test_condensed_text_is_a_pure_function_of_the_result() -> None:
    first = make_ctx(history(("list_users", TABLE)))
    later = make_ctx(history(("list_users", TABLE), ("run_tests", LOG)))
    a = step(first).rewrite(first, list(range(len(first.units)))).edits[0]
    b = step(later).rewrite(later, list(range(len(later.units)))).edits[0]
    assert a == b  # the same bytes from the first turn the result appears


def test_the_table_holds_every_value() -> None:
    ctx = make_ctx(history(("list_users", TABLE)))
    [edit] = step(ctx).rewrite(ctx, list(range(len(ctx.units)))).edits
    body = (OPENAI_CHAT.result_text(edit.message or {}) or "").split("\n", 1)[1]
    header, *rows = body.split("\n")
    keys = header.split("|")
    rebuilt = [
        dict(zip(keys, (json.loads(c) for c in row.split("|")), strict=True)) for row in rows
    ]
    assert minify(rebuilt) == minify(ROWS)
