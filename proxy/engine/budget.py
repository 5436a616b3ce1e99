"""The token budget of one request: window, reserved output, allowance, trigger and target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, ValidationInfo, field_validator

from proxy.engine.config_base import StrictModel

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

    growth_turns: Annotated[int, Field(ge=0, le=100)] = Field(
        default=6,
        description="When the input must be reduced, leave room for this many turns of the "
        "conversation's own growth below the trigger, going below `target` (and a step's own "
        "target) when one turn is large: the growth is the median of what the recent turns "
        "added (in a turn with several tool exchanges, each exchange after the first counts as "
        "a turn), measured from the history itself, so preparation stays a pure function of "
        "the request. Deeper cuts come less often, so the prompt prefix (the provider's prompt "
        "cache) breaks less often. 0 = reduce to `target` only.",
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


class ModelLookup(Protocol):
    def lookup(self, model: str) -> Any: ...


@dataclass(frozen=True)
class Budget:
    context_window: int
    reserved_output: int
    safety_margin: int
    allowance: int
    trigger: int
    target: int


def scaled(value: float, whole: int) -> int:
    """Numbers <= 1 are fractions of `whole`; larger ones are tokens, capped at `whole` before
    any conversion (so 1e300 never overflows)."""
    if value <= 1:
        return int(value * whole)
    return whole if value >= whole else int(value)


def compute_budget(
    policy: BudgetPolicy, model: str, requested_output: int | None, models: ModelLookup
) -> Budget:
    """The budget for a request for `model` that asks for at most `requested_output` tokens
    (its explicit output limit, if any)."""
    window = policy.context_window
    if window == "auto":
        info = models.lookup(model) if model else None
        window = getattr(info, "context_window", None) or policy.fallback_context_window
    reserved = policy.reserved_output
    if reserved == "auto":
        requested = requested_output
        # Without max tokens in the request, never reserve more than half the window: a small
        # local model (n_ctx 2048) must not have every request refused by a 4096 default.
        default = min(policy.default_reserved_output, window // 2)
        reserved = default if requested is None else requested
    margin = scaled(policy.safety_margin, window)
    allowance = max(window - reserved - margin, 0)
    trigger = scaled(policy.trigger, allowance)
    target = min(scaled(policy.target, allowance), trigger)
    return Budget(window, reserved, margin, allowance, trigger, target)
