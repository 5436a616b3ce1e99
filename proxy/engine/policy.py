"""Policy models: the declarative, per-tenant description of how a request is prepared.

Strict (`extra="forbid"`): a typo in a policy file is an error naming the key, never ignored.
Numbers in `budget` that are <= 1.0 are fractions of the allowance; larger ones are tokens.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from proxy.engine.steps.clear_tool_results import ClearToolResultsConfig
from proxy.engine.steps.drop_turns import DropTurnsConfig
from proxy.engine.steps.offload_tool_results import OffloadToolResultsConfig


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


Mode = Literal["off", "inspect", "reject", "window"]
FractionOrTokens = Annotated[float, Field(gt=0)]


class BudgetPolicy(StrictModel):
    context_window: Literal["auto"] | Annotated[int, Field(gt=0)] = Field(
        default="auto",
        description="Input window in tokens, or `auto` (litellm's bundled model map).",
    )
    fallback_context_window: Annotated[int, Field(gt=0)] = Field(
        default=128_000, description="Window used when `auto` finds no entry for the model."
    )
    reserved_output: Literal["auto"] | Annotated[int, Field(ge=0)] = Field(
        default="auto",
        description="Tokens kept free for the answer; `auto` takes the request's "
        "max_completion_tokens/max_tokens, else `default_reserved_output` "
        "(at most half the window).",
    )
    default_reserved_output: Annotated[int, Field(ge=0)] = 4096
    safety_margin: Annotated[float, Field(ge=0)] = Field(
        default=0.02, description="Tokens (or fraction of the window when <= 1) never used."
    )
    trigger: FractionOrTokens = Field(
        default=0.95,
        description="Reduce only when the input exceeds this (fraction of allowance or tokens).",
    )
    target: FractionOrTokens = Field(
        default=0.7,
        description="When reducing, reduce to this (fraction of allowance or tokens).",
        validate_default=True,  # `trigger: 0.5` alone must fail against the default target
    )

    @field_validator("target")
    @classmethod
    def _target_below_trigger(cls, target: float, info: ValidationInfo) -> float:
        # A field validator (not a model validator) so that the error names `budget.target`.
        # Mixed units (fraction vs tokens) cannot be compared before the allowance is known.
        trigger = info.data.get("trigger")
        if trigger is None:  # trigger itself was invalid; its own error is reported
            return target
        both_fractions = trigger <= 1 and target <= 1
        both_tokens = trigger > 1 and target > 1
        if (both_fractions or both_tokens) and target > trigger:
            raise ValueError(f"target ({target:g}) must not exceed trigger ({trigger:g})")
        return target


class PinRule(StrictModel):
    """A message matching every given field is pinned (never dropped or cleared)."""

    role: str | None = None
    name: str | None = None
    contains: str | None = Field(
        default=None, description="Substring of the message's text content."
    )


class ProtectPolicy(StrictModel):
    first_user: bool = Field(default=True, description="Keep the first user message (the task).")
    recent_turns: Annotated[int, Field(ge=0)] = Field(
        default=2,
        description="The most recent N turns are never dropped (the current one always is kept).",
    )
    recent_tool_exchanges: Annotated[int, Field(ge=0)] = Field(
        default=2, description="The most recent N tool exchanges are never cleared."
    )
    pinned: list[PinRule] = Field(default_factory=list)
    clear_recent_before_refusing: bool = Field(
        default=True,
        description="Last resort before a refusal: clear the recent tool exchanges' results too "
        "(they stay readable through the read tool).",
    )


class ToolResultsPolicy(StrictModel):
    offload_threshold_chars: Annotated[int, Field(ge=0)] = Field(
        default=8000, description="Tool results longer than this are offloaded behind a preview."
    )
    preview_head_chars: Annotated[int, Field(ge=0)] = 1500
    preview_tail_chars: Annotated[int, Field(ge=0)] = 500
    exclude_tools: list[str] = Field(
        default_factory=list, description="Tool names (globs) whose results are never touched."
    )
    refetchable_tools: list[str] = Field(
        default_factory=list,
        description="Tool names (globs) whose cleared results tell the model to call them again.",
    )
    clear_at_least: Annotated[int, Field(ge=0)] = Field(
        default=0, description="Clear nothing unless at least this many tokens would be freed."
    )


StepConfig = Annotated[
    OffloadToolResultsConfig | ClearToolResultsConfig | DropTurnsConfig,
    Field(discriminator="kind"),
]


def _default_steps() -> list[StepConfig]:
    return [OffloadToolResultsConfig(), ClearToolResultsConfig(), DropTurnsConfig()]


class ArtifactsPolicy(StrictModel):
    ttl_seconds: Annotated[int, Field(gt=0)] = 86_400
    max_per_scope: Annotated[int, Field(gt=0)] = 10_000
    max_chars: Annotated[int, Field(gt=0)] = 20_000_000


class ReadToolPolicy(StrictModel):
    enabled: bool = True
    max_page_chars: Annotated[int, Field(gt=0, le=20_000)] = 20_000
    max_rounds: Annotated[int, Field(ge=0, le=20)] = 4


class CountingPolicy(StrictModel):
    tokenizer: str = Field(
        default="auto",
        description="`auto` (by model), `o200k_base`, `cl100k_base`, `estimate`, "
        "or `hf:<path to tokenizer.json>`.",
    )


class Policy(StrictModel):
    name: str = Field(default="", description="Set from the file name; not written in files.")
    extends: str | None = Field(default=None, description="Name of the policy this one builds on.")
    description: str = ""
    mode: Mode = "window"
    on_invalid: Literal["forward", "reject"] = Field(
        default="forward", description="Structurally broken messages: forward untouched, or refuse."
    )
    budget: BudgetPolicy = Field(default_factory=BudgetPolicy)
    counting: CountingPolicy = Field(default_factory=CountingPolicy)
    protect: ProtectPolicy = Field(default_factory=ProtectPolicy)
    tool_results: ToolResultsPolicy = Field(default_factory=ToolResultsPolicy)
    steps: list[StepConfig] = Field(default_factory=_default_steps)
    artifacts: ArtifactsPolicy = Field(default_factory=ArtifactsPolicy)
    read_tool: ReadToolPolicy = Field(default_factory=ReadToolPolicy)
    models: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per-model overrides: glob on the request's model (fnmatch, case-insensitive) "
        "-> partial policy, deep-merged over this one (first matching glob wins).",
    )
