"""proxy/engine/steps/__init__.py: the registry is the one place a step is named."""

from __future__ import annotations

import typing

from context_harness import make_ctx
from pydantic import TypeAdapter
from step_harness import tool_history

from proxy.engine.config_base import StepConfig, StrictModel
from proxy.engine.policy import Policy
from proxy.engine.step_api import Step
from proxy.engine.steps import REGISTRY, StepConfigs, build_steps, default_step_configs


def test_registry_and_build_steps_follow_policy_order() -> None:
    names = [
        "condense_tool_results",
        "offload_tool_results",
        "offload_messages",
        "clear_tool_results",
        "drop_turns",
        "summarize",
        "defer_tools",
    ]
    assert list(REGISTRY) == names
    ctx = make_ctx(tool_history())
    configs = list(reversed(Policy(steps=[{"kind": name} for name in names]).steps))
    steps = build_steps(configs, ctx)
    assert [s.name for s in steps] == list(reversed(names))
    assert all(step.config is config for step, config in zip(steps, configs, strict=True))


def test_each_step_names_itself_once_and_owns_a_strict_config() -> None:
    for name, step in REGISTRY.items():
        assert issubclass(step, Step) and step.name == name
        assert issubclass(step.config_model, StepConfig)
        assert issubclass(step.config_model, StrictModel)
        assert step.config_model.model_validate({}).kind == name  # the discriminator


def test_the_policy_union_and_defaults_are_derived_from_the_registry() -> None:
    adapter: TypeAdapter[typing.Any] = TypeAdapter(StepConfigs)
    for name, step in REGISTRY.items():
        assert type(adapter.validate_python({"kind": name})) is step.config_model
    defaults = [name for name, step in REGISTRY.items() if step.in_default_policy]
    assert [c.kind for c in default_step_configs()] == defaults
    assert "offload_messages" not in defaults  # opt-in
    assert "summarize" not in defaults  # `mode: compact` puts it in place of drop_turns
    assert "defer_tools" not in defaults  # opt-in
    assert Policy().steps == default_step_configs()
