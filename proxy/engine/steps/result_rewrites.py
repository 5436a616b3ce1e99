"""Shared by the steps that rewrite tool results in place (offload and clear)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from fnmatch import fnmatchcase
from typing import Any

from proxy.artifacts.store import NewArtifact
from proxy.engine.step_api import Edit, PrepareContext, StepOutput
from proxy.engine.tool_text import StoredText, is_proxy_text, stored_form

# (context, message index, message, text, tool name) -> new content, or None to leave it
Rewriter = Callable[[PrepareContext, int, dict[str, Any], str, str | None], str | None]


def matches_any(name: str | None, globs: list[str]) -> bool:
    return name is not None and any(fnmatchcase(name, g) for g in globs)


def stored_text(ctx: PrepareContext, text: str) -> StoredText:
    """What the store keeps of `text` taken out of a prompt (truncated, with a marker, over
    `artifacts.max_chars`), and its id (of what is stored)."""
    content = stored_form(text, ctx.max_stored_chars)
    return StoredText(ctx.artifact_id(content), content, len(text))


def tool_results(
    ctx: PrepareContext, u: int, excluded: list[str]
) -> Iterator[tuple[int, dict[str, Any], str, str | None]]:
    """(index, message, text, tool name) of each reducible tool result in unit u, skipping the
    results of tools matching a glob in `excluded`."""
    unit = ctx.units[u]
    if not unit.is_tool_exchange or u in ctx.pinned_units:
        return
    for index in unit.result_indices:
        message = ctx.messages[index]
        text = ctx.wire.result_text(message)
        if text is None or is_proxy_text(text, ctx.own_text_mac):
            continue
        name = ctx.result_names.get(index)
        if matches_any(name, excluded):
            continue
        yield index, message, text, name


class UnitRewrites:
    """Per-unit rewrites of one step, computed once per request and shared by plan and rewrite."""

    def __init__(
        self,
        ctx: PrepareContext,
        step: str,
        rewrite: Rewriter,
        exclude_tools: list[str],
        min_saving: float = 0.0,
    ) -> None:
        """`min_saving`: a rewrite stands only if it saves at least this share of the result
        message's counted tokens (always at least one token)."""
        self._ctx = ctx
        self._min_saving = min_saving
        self._step = step
        self._rewrite = rewrite
        self._exclude_tools = exclude_tools
        self._cache: dict[int, tuple[int, list[Edit], dict[str, NewArtifact]]] = {}

    def cost(self, u: int) -> int:
        return self._get(u)[0]

    def output(self, units: list[int]) -> StepOutput:
        out = StepOutput()
        for u in units:
            cost, edits, artifacts = self._get(u)
            if edits:
                out.units.append(u)
                out.edits.extend(edits)
                out.artifacts.update(artifacts)
                out.tokens_freed += self._ctx.unit_cost(u) - cost
        return out

    def _get(self, u: int) -> tuple[int, list[Edit], dict[str, NewArtifact]]:
        if u not in self._cache:
            self._cache[u] = self._compute(u)
        return self._cache[u]

    def _compute(self, u: int) -> tuple[int, list[Edit], dict[str, NewArtifact]]:
        ctx = self._ctx
        cost = ctx.unit_cost(u)
        edits: list[Edit] = []
        artifacts: dict[str, NewArtifact] = {}
        for index, message, text, name in tool_results(ctx, u, self._exclude_tools):
            content = self._rewrite(ctx, index, message, text, name)
            if content is None:
                continue
            new_message = ctx.wire.with_result_text(message, content)
            new_cost = ctx.counter.count_message(new_message)
            old_cost = ctx.message_costs[index]
            if new_cost >= old_cost or old_cost - new_cost < old_cost * self._min_saving:
                continue
            stored = stored_text(ctx, text)
            meta = {"tool": name, **ctx.wire.result_meta(message), "step": self._step}
            artifacts[stored.artifact_id] = NewArtifact(stored.content, "tool_result", meta)
            edits.append(Edit("replace", index, new_message, stored.artifact_id))
            cost += new_cost - ctx.message_costs[index]
        return cost, edits, artifacts
