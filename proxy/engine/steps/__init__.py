"""The reduction steps: one file, one config model and one registry entry each."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from proxy.engine.step_api import PrepareContext, Step
from proxy.engine.steps.clear_tool_results import ClearToolResults
from proxy.engine.steps.drop_turns import DropTurns
from proxy.engine.steps.offload_tool_results import OffloadToolResults

REGISTRY: Mapping[str, Callable[[Any, PrepareContext], Step]] = MappingProxyType(
    {
        OffloadToolResults.name: OffloadToolResults,
        ClearToolResults.name: ClearToolResults,
        DropTurns.name: DropTurns,
    }
)


def build_steps(configs: list[Any], ctx: PrepareContext) -> list[Step]:
    return [REGISTRY[config.kind](config, ctx) for config in configs]
