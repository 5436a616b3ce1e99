"""The reduction steps: one file each (the step and its config model), one registry line each.

`REGISTRY` is the only place a step is named: the policy's `steps` union (`StepConfigs`) and its
default list are derived from it. Registry order is the default policy's order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field

from proxy.engine.config_base import StepConfig
from proxy.engine.step_api import PrepareContext, Step
from proxy.engine.steps.clear_tool_results import ClearToolResults
from proxy.engine.steps.condense_tool_results import CondenseToolResults
from proxy.engine.steps.defer_tools import DeferTools
from proxy.engine.steps.drop_turns import DropTurns
from proxy.engine.steps.offload_messages import OffloadMessages
from proxy.engine.steps.offload_tool_results import OffloadToolResults
from proxy.engine.steps.summarize import Summarize

_STEPS: tuple[type[Step[Any]], ...] = (
    CondenseToolResults,
    OffloadToolResults,
    OffloadMessages,
    ClearToolResults,
    DropTurns,
    Summarize,
    DeferTools,
)
REGISTRY: Mapping[str, type[Step[Any]]] = MappingProxyType({s.name: s for s in _STEPS})

if TYPE_CHECKING:
    StepConfigs = StepConfig
else:  # a discriminated union of every registered step's config model, keyed by `kind`
    StepConfigs = Annotated[
        Union[tuple(step.config_model for step in _STEPS)],  # noqa: UP007 (built at runtime)
        Field(discriminator="kind"),
    ]


def default_step_configs() -> list[StepConfig]:
    """The `steps` of a policy that sets none."""
    return [step.config_model.model_validate({}) for step in _STEPS if step.in_default_policy]


def build_steps(configs: Iterable[StepConfig], ctx: PrepareContext) -> list[Step[Any]]:
    return [REGISTRY[config.kind](config, ctx) for config in configs]
