"""A three-turn conversation with tool exchanges, and the offload/clear steps built on it."""

from __future__ import annotations

from typing import Any

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

from proxy.engine.step_api import PrepareContext
from proxy.engine.steps.clear_tool_results import ClearToolResults, ClearToolResultsConfig
from proxy.engine.steps.offload_tool_results import OffloadToolResults, OffloadToolResultsConfig
from proxy.engine.tool_text import StoredText, preview
from proxy.formats.openai_chat.fields import with_content

ALPHA = big("alpha", 2000)
GAMMA = big("gamma", 3000)
OFFLOAD = {"threshold_chars": 500, "preview_head_chars": 100, "preview_tail_chars": 50}
"""Offload settings small enough for ALPHA and GAMMA (the built-in threshold is 8000 chars)."""


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


def tool_ctx(messages: list[dict[str, Any]] | None = None, **sections: Any) -> PrepareContext:
    """The context of `messages` (tool_history() by default) under a policy of `sections`."""
    return make_ctx(messages or tool_history(), policy(**sections))


def offload(ctx: PrepareContext, **settings: Any) -> OffloadToolResults:
    """The offload step with OFFLOAD's settings, updated by `settings`."""
    return OffloadToolResults(OffloadToolResultsConfig(**{**OFFLOAD, **settings}), ctx)


def clear(ctx: PrepareContext, **settings: Any) -> ClearToolResults:
    return ClearToolResults(ClearToolResultsConfig(**settings), ctx)


def clear_all(ctx: PrepareContext, **settings: Any) -> ClearToolResults:
    """The clear step keeping no recent exchange."""
    return clear(ctx, keep_recent_exchanges=0, **settings)


def expected_preview(
    ctx: PrepareContext, index: int, text: str, config: OffloadToolResultsConfig | None = None
) -> str:
    config = config or OffloadToolResultsConfig(**OFFLOAD)
    return preview(
        StoredText(artifact_id(text), text, len(text)),
        text,
        ctx.message_costs[index],
        config.preview_head_chars,
        config.preview_tail_chars,
        ctx.read_tool_enabled,
        ctx.own_text_mac,
    )


def replaced_cost(ctx: PrepareContext, u: int, index: int, content: str) -> int:
    new = counter().count_message(with_content(ctx.messages[index], content))
    return ctx.unit_cost(u) - ctx.message_costs[index] + new
