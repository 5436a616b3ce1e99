"""The token budget of one request: window (and where it came from), reserved output,
allowance, trigger, target, and the refusal limit.

The reserved output is a reduction goal: `allowance = window - reserved - margin` sets the trigger
and the target. A refusal is another matter: the proxy refuses only what the provider would, a
prompt over `limit = window - (the request's explicit output limit, or the policy's
refusal_output_floor) - margin`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, ValidationInfo, field_validator

from proxy.engine.config_base import StrictModel
from proxy.engine.manifest import Manifest, NoteCode
from proxy.tokens.calibration_rule import NO_RATIO, AppliedRatio, CalibrationKey, RatioSource

FractionOrTokens = Annotated[float, Field(gt=0)]


class BudgetPolicy(StrictModel):
    context_window: Literal["auto"] | Annotated[int, Field(gt=0)] = Field(
        default="auto",
        description="Input window in tokens, or `auto` (litellm's bundled model map).",
    )
    fallback_context_window: Annotated[int, Field(gt=0)] = Field(
        default=128_000,
        description="Window used when `auto` finds no entry for the model in the model map and "
        "the upstream does not say (vLLM `/v1/models`, llama.cpp `/props`); the manifest's "
        "`context_window_source` is then `fallback` and responses carry the note "
        "`window_fallback`.",
    )
    reserved_output: Literal["auto"] | Annotated[int, Field(ge=0)] = Field(
        default="auto",
        description="Tokens kept free for the answer; `auto` takes the request's "
        "max_completion_tokens/max_tokens, else `default_reserved_output` "
        "(at most half the window). A reduction goal only: the allowance, trigger and target "
        "leave it free, but a request is refused only over the refusal limit "
        "(see `refusal_output_floor`).",
    )
    default_reserved_output: Annotated[int, Field(ge=0)] = 4096
    refusal_output_floor: Annotated[int, Field(ge=0)] = Field(
        default=256,
        description="Refuse only what the provider would refuse: a request without an explicit "
        "output limit (max_completion_tokens/max_tokens) is refused only when its prompt exceeds "
        "`window - min(refusal_output_floor, reserved output) - safety_margin`; with one, "
        "`window - that limit - safety_margin`. Between the allowance and that limit a request "
        "is reduced as far as the steps go and forwarded; the last resort before a refusal "
        "(clearing protected tool results) applies only over the limit.",
    )
    safety_margin: Annotated[float, Field(ge=0)] = Field(
        default=0.02, description="Tokens (or fraction of the window when <= 1) never used."
    )
    trigger: FractionOrTokens = Field(
        default=1.0,
        description="Reduce only when the input exceeds this (fraction of allowance or tokens).",
    )
    target: FractionOrTokens = Field(
        default=0.7,
        description="When reducing, reduce to this (fraction of allowance or tokens).",
        validate_default=True,  # `trigger: 0.5` alone must fail against the default target
    )

    count_ratio: Literal["auto"] | Annotated[float, Field(ge=0.25, le=4)] = Field(
        default="auto",
        description="Upstream tokens per token the proxy counts, which scales the window into "
        "the proxy's counts: `auto` learns it from the `usage` the upstream reports (per "
        "upstream and model: the requester's own answers once it has 3, else what at least 3 "
        "other credentials agree on, else 1); a number pins it for this policy (put it under "
        "`models:` for one model); 1 turns calibration off.",
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


class WindowSource(StrEnum):
    """Where a budget's context window came from (the manifest's `context_window_source`)."""

    policy = "policy"
    """A number in the policy's `budget.context_window`."""
    upstream_error = "upstream_error"
    """The window an upstream stated in a context-length error for this model (caps any other)."""
    model_map = "model_map"
    """litellm's bundled model map."""
    upstream = "upstream"
    """Asked of the upstream (vLLM `/v1/models` `max_model_len`, llama.cpp `/props` `n_ctx`)."""
    fallback = "fallback"
    """None of the above knew the model: the policy's `fallback_context_window`."""


class LearnedWindow(Protocol):
    """A model's window as an upstream told it (`upstream.windows.KnownWindow`)."""

    @property
    def tokens(self) -> int: ...

    @property
    def stated(self) -> bool:
        """Stated in a context-length error (caps any other window), not listed by the upstream."""
        ...


@dataclass(frozen=True)
class Budget:
    context_window: int
    reserved_output: int
    safety_margin: int
    allowance: int
    trigger: int
    target: int
    limit: int = 0
    """The largest prompt not refused (the provider's own limit, as far as the proxy knows)."""
    window_source: WindowSource = WindowSource.policy
    count_ratio: float = 1.0
    """Upstream tokens per counted token (calibration); allowance, trigger, target and limit are
    in the proxy's own counts, i.e. the upstream's numbers divided by it."""
    count_ratio_source: RatioSource = RatioSource.none

    @property
    def reduce_over(self) -> int:
        """The tokens over which a request is reduced: the trigger, or the refusal limit when
        that is lower (an explicit output limit larger than the reserved output): a prompt the
        provider would refuse is reduced, whatever the trigger says."""
        return min(self.trigger, self.limit) if self.limit > 0 else self.trigger

    @property
    def plan_over(self) -> int:
        """`reduce_over` as the planner checks it: the plan sums each item's own count, which
        can fall a few tokens short of the whole prompt's (a stand-in's numbers, say), so a
        trigger at the allowance is planned a little under it: a prompt at its trigger is never
        sent over the allowance. A lower trigger is planned as it is."""
        return planned_trigger(self.reduce_over, self.allowance)


def planned_trigger(trigger: int, allowance: int) -> int:
    """`trigger` as the planner checks it: at most the allowance less the tokens by which a
    plan's sum may fall short of the prompt's count (0.2%, at least 4)."""
    return min(trigger, allowance - max(4, allowance // 500))


def choose_window(
    policy: BudgetPolicy, model: str, models: ModelLookup, learned: LearnedWindow | None
) -> tuple[int, WindowSource]:
    """The window and its source: the policy's number, else the model map, else the upstream's
    listing, else the fallback; a window an upstream's error stated caps any of them."""
    if policy.context_window != "auto":
        window, source = policy.context_window, WindowSource.policy
    else:
        info = models.lookup(model) if model else None
        mapped = getattr(info, "context_window", None)
        if mapped:
            window, source = mapped, WindowSource.model_map
        elif learned is not None and not learned.stated:
            window, source = learned.tokens, WindowSource.upstream
        else:
            window, source = policy.fallback_context_window, WindowSource.fallback
    stated = learned.tokens if learned is not None and learned.stated else None
    if stated is not None and (stated < window or source == WindowSource.fallback):
        window, source = stated, WindowSource.upstream_error
    return window, source


def scaled(value: float, whole: int) -> int:
    """Numbers <= 1 are fractions of `whole`; larger ones are tokens, capped at `whole` before
    any conversion (so 1e300 never overflows)."""
    if value <= 1:
        return int(value * whole)
    return whole if value >= whole else int(value)


ESTIMATE_MARGIN = 0.05
"""The least safety margin when the proxy counts with an estimate (a model whose tokenizer it
does not have): calibration corrects the estimate's bias, but what it counts for a given text
still strays from the model's count by a few percent (seen here: 0.85-0.90 of the estimate on
one conversation with llama.cpp), and a trigger at the allowance must not send the prompt over
the window."""


def compute_budget(
    policy: BudgetPolicy,
    model: str,
    requested_output: int | None,
    models: ModelLookup,
    learned: LearnedWindow | None = None,
    count_ratio: float = 1.0,
    *,
    ratio_source: RatioSource = RatioSource.none,
    estimated: bool = False,
) -> Budget:
    """The budget for a request for `model` that asks for at most `requested_output` tokens
    (its explicit output limit, if any); `learned` is what the upstream told of its window;
    `count_ratio` how many tokens the upstream counts per token the proxy counts (learned from
    `ratio_source`); `estimated`: the proxy counts with an estimate, not the model's tokenizer
    (its margin is at least `ESTIMATE_MARGIN`)."""
    window, source = choose_window(policy, model, models, learned)
    reserved = policy.reserved_output
    if reserved == "auto":
        requested = requested_output
        # Without max tokens in the request, never reserve more than half the window: a small
        # local model (n_ctx 2048) must not have every request refused by a 4096 default.
        default = min(policy.default_reserved_output, window // 2)
        reserved = default if requested is None else requested
    margin = scaled(policy.safety_margin, window)
    if estimated:
        margin = max(margin, scaled(ESTIMATE_MARGIN, window))
    allowance = max(window - reserved - margin, 0)
    trigger = scaled(policy.trigger, allowance)
    target = min(scaled(policy.target, allowance), trigger)
    kept_free = min(policy.refusal_output_floor, reserved)
    if requested_output is not None:
        kept_free = requested_output
    limit = max(window - kept_free - margin, 0)
    if count_ratio != 1.0:  # the upstream's tokens -> the proxy's counts
        allowance, trigger, target, limit = (
            int(n / count_ratio) for n in (allowance, trigger, target, limit)
        )
    return Budget(
        window, reserved, margin, allowance, trigger, target, limit, source, count_ratio,
        ratio_source,
    )  # fmt: skip


@dataclass(frozen=True)
class Learned:
    """What the proxy learned of a request's upstream: the model's window, the count ratio."""

    window: LearnedWindow | None = None
    ratio: AppliedRatio = NO_RATIO
    cache_ttl: int | None = None
    """The prompt-cache lifetime configured for the model (`upstreams[].prompt_cache`; None:
    unknown, 0: none)."""


class RatioReader(Protocol):
    """The learned count ratios (`tokens.calibration.CountCalibration`)."""

    def applied(self, key: CalibrationKey, contributor: str) -> AppliedRatio: ...


def count_ratio_for(
    policy: BudgetPolicy, ratios: RatioReader, key: CalibrationKey, contributor: str
) -> AppliedRatio:
    """The ratio a request applies: the policy's pinned `count_ratio`, else the one learned for
    its upstream and model (its own contributor's, or the agreed one)."""
    if policy.count_ratio != "auto":
        return AppliedRatio(policy.count_ratio, RatioSource.pinned)
    return ratios.applied(key, contributor)


_RATIO_SOURCES = {
    RatioSource.own: ", from this credential's own answers",
    RatioSource.agreed: ", as other credentials agree",
}


_WINDOW_NOTES = {
    WindowSource.fallback: (
        NoteCode.window_fallback,
        "context window {0} is the policy's fallback_context_window: neither the model map nor "
        "the upstream knows this model",
    ),
    WindowSource.upstream: (NoteCode.window_upstream, "context window {0} taken from the upstream"),
    WindowSource.upstream_error: (
        NoteCode.window_corrected,
        "context window {0} as stated by the upstream's context-length error for this model",
    ),
}


def note_budget(manifest: Manifest, budget: Budget) -> None:
    """The notes a client should see about its budget: an uncertain window, estimated counts."""
    window_note = _WINDOW_NOTES.get(budget.window_source)
    if window_note is not None:
        code, text = window_note
        manifest.note(code, text.format(budget.context_window))
    ratio_note = _ratio_note(budget)
    if ratio_note is not None:
        manifest.note(NoteCode.counts_calibrated, ratio_note)
    if manifest.counting_method == "estimate":
        manifest.note(
            NoteCode.estimated_tokens,
            "tokens estimated (no tokenizer for this model): counts are approximate",
        )


def _ratio_note(budget: Budget) -> str | None:
    ratio = budget.count_ratio
    if ratio == 1.0:
        return None
    if budget.count_ratio_source is RatioSource.pinned:
        return f"budget scaled by the count ratio {ratio:.3f} pinned by the policy's budget"
    where = _RATIO_SOURCES.get(budget.count_ratio_source, "")
    return (
        f"budget scaled by the upstream's count ratio {ratio:.3f} "
        f"(usage.prompt_tokens over the proxy's counts{where})"
    )
