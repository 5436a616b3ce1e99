from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from proxy.engine.budget import (
    Budget,
    BudgetPolicy,
    WindowSource,
    compute_budget,
    note_budget,
    scaled,
)
from proxy.engine.manifest import Manifest, NoteCode
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.tokens.catalog import ModelInfo


class Models:
    def lookup(self, model: str) -> ModelInfo | None:
        return ModelInfo(context_window=100_000, max_output_tokens=None) if model == "m" else None


def budget(policy: dict[str, Any], body: dict[str, Any]) -> Any:
    """The budget of a chat-completions `body` (its model and output limit read by the adapter)."""
    model, limit = OPENAI_CHAT.model(body), OPENAI_CHAT.output_limit(body)
    return compute_budget(BudgetPolicy.model_validate(policy), model, limit, Models())


def test_fractions_of_the_allowance() -> None:
    b = budget({"safety_margin": 0.01, "trigger": 0.9, "target": 0.5}, {"model": "m"})
    assert b.context_window == 100_000 and b.reserved_output == 4096 and b.safety_margin == 1000
    assert b.allowance == 100_000 - 4096 - 1000
    assert b.trigger == int(0.9 * b.allowance) and b.target == int(0.5 * b.allowance)


def test_absolute_numbers_and_request_output() -> None:
    b = budget(
        {"context_window": 10_000, "safety_margin": 100, "trigger": 8000, "target": 6000},
        {"model": "x", "max_completion_tokens": 500, "max_tokens": 900},
    )
    assert (b.reserved_output, b.allowance, b.trigger, b.target) == (500, 9400, 8000, 6000)


def test_unknown_model_uses_fallback_and_bad_max_tokens_is_ignored() -> None:
    b = budget(
        {"fallback_context_window": 5000, "safety_margin": 0}, {"model": 7, "max_tokens": -3}
    )
    assert b.context_window == 5000 and b.reserved_output == 2500  # the default, capped


def test_default_reserved_output_is_at_most_half_the_window() -> None:
    small = budget({"context_window": 2048, "safety_margin": 0}, {"model": "x"})
    assert (small.reserved_output, small.allowance) == (1024, 1024)
    asked = budget({"context_window": 2048, "safety_margin": 0}, {"model": "x", "max_tokens": 1500})
    assert (asked.reserved_output, asked.allowance) == (1500, 548)  # the request's own number
    fixed = budget({"context_window": 2048, "reserved_output": 1800, "safety_margin": 0}, {})
    assert fixed.reserved_output == 1800  # a number in the policy is taken as written
    large = budget({"context_window": 8192}, {"model": "x"})
    assert large.reserved_output == 4096


def test_reserved_output_above_window_leaves_no_allowance() -> None:
    b = budget({"context_window": 1000}, {"max_tokens": 5000})
    assert b.allowance == 0 and b.trigger == 0 and b.target == 0


def test_huge_numbers_are_capped_at_the_whole() -> None:
    b = budget(
        {"context_window": 10_000, "safety_margin": 0, "trigger": 1e300},
        {"model": "x", "max_tokens": 1000},
    )
    assert (b.allowance, b.trigger) == (9000, 9000)
    b = budget({"context_window": 10_000, "safety_margin": 1e300}, {"model": "x"})
    assert (b.safety_margin, b.allowance, b.trigger, b.target) == (10_000, 0, 0, 0)


def test_one_is_the_whole_and_larger_numbers_are_tokens() -> None:
    assert (scaled(1, 500), scaled(1.0, 500), scaled(0.5, 500)) == (500, 500, 250)
    assert (scaled(2, 500), scaled(1.5, 500), scaled(499, 500)) == (2, 1, 499)
    assert (scaled(500, 500), scaled(501, 500)) == (500, 500)
    b = budget(
        {"context_window": 10_000, "safety_margin": 0, "trigger": 1, "target": 2},
        {"max_tokens": 1000},
    )
    assert (b.allowance, b.trigger, b.target) == (9000, 9000, 2)


def test_max_tokens_zero_reserves_nothing() -> None:
    b = budget({"context_window": 10_000, "safety_margin": 0}, {"max_tokens": 0})
    assert (b.reserved_output, b.allowance) == (0, 10_000)
    b = budget(
        {"context_window": 10_000, "safety_margin": 0},
        {"max_completion_tokens": 0, "max_tokens": 700},
    )
    assert b.reserved_output == 0  # max_completion_tokens wins, even when it is 0


def test_default_reserved_output_on_an_odd_window_is_whole_tokens() -> None:
    b = budget({"context_window": 2049, "safety_margin": 0}, {"model": "x"})
    assert (b.reserved_output, b.allowance) == (1024, 1025)
    sources = ("window_source", "count_ratio", "count_ratio_source")
    counts = {k: v for k, v in vars(b).items() if k not in sources}
    assert all(type(v) is int for v in counts.values())


class RecordingModels:
    def __init__(self) -> None:
        self.asked: list[Any] = []

    def lookup(self, model: str) -> ModelInfo | None:
        self.asked.append(model)
        return None


@pytest.mark.parametrize("model", [7, None, ["m"], {"m": 1}])
def test_a_model_that_is_not_a_string_is_never_looked_up(model: Any) -> None:
    models = RecordingModels()
    policy = BudgetPolicy.model_validate({"fallback_context_window": 5000})
    b = compute_budget(policy, OPENAI_CHAT.model({"model": model}), None, models)  # "" for these
    assert models.asked == [] and b.context_window == 5000
    compute_budget(policy, OPENAI_CHAT.model({"model": "gpt-4o"}), None, models)
    assert models.asked == ["gpt-4o"]


# -- where the window comes from -------------------------------------------------------------


@dataclass(frozen=True)
class Told:
    """A window an upstream told (`engine.budget.LearnedWindow`)."""

    tokens: int
    stated: bool = False


def window_of(policy: dict[str, Any], model: str, learned: Told | None = None) -> Any:
    b = compute_budget(BudgetPolicy.model_validate(policy), model, None, Models(), learned)
    return b.context_window, b.window_source


def test_window_source_policy_map_upstream_fallback() -> None:
    assert window_of({"context_window": 9000}, "m") == (9000, WindowSource.policy)
    assert window_of({}, "m") == (100_000, WindowSource.model_map)
    assert window_of({}, "m", Told(4096)) == (100_000, WindowSource.model_map)  # the map first
    assert window_of({}, "local", Told(4096)) == (4096, WindowSource.upstream)
    assert window_of({"fallback_context_window": 5000}, "local") == (5000, WindowSource.fallback)
    assert window_of({}, "") == (128_000, WindowSource.fallback)


def test_a_window_stated_by_an_upstream_error_caps_any_other() -> None:
    stated = Told(8000, stated=True)
    assert window_of({}, "m", stated) == (8000, WindowSource.upstream_error)
    assert window_of({"context_window": 9000}, "m", stated) == (8000, WindowSource.upstream_error)
    assert window_of({}, "local", stated) == (8000, WindowSource.upstream_error)
    # a larger stated window does not widen a known one (the map or the policy may be stricter)
    assert window_of({}, "m", Told(200_000, stated=True)) == (100_000, WindowSource.model_map)
    # but it replaces the fallback, which is only a guess
    assert window_of({}, "local", Told(200_000, stated=True)) == (
        200_000,
        WindowSource.upstream_error,
    )


# -- the refusal limit: refuse only what the provider would refuse ------------------------------


def test_gpt_4_without_max_tokens_keeps_only_the_floor_free_for_refusals() -> None:
    b = budget({"context_window": 8192}, {"model": "gpt-4"})
    assert (b.reserved_output, b.safety_margin) == (4096, 163)
    assert b.allowance == 8192 - 4096 - 163  # the reduction goal is unchanged
    assert b.limit == 8192 - 256 - 163  # a 4,524-token prompt is not refused
    assert b.allowance < 4524 <= b.limit


def test_an_explicit_output_limit_is_kept_free_for_refusals() -> None:
    b = budget({"context_window": 8192}, {"model": "gpt-4", "max_tokens": 4096})
    assert b.limit == b.allowance == 8192 - 4096 - 163
    b = budget({"context_window": 8192, "reserved_output": 100}, {"max_tokens": 4096})
    assert (b.allowance, b.limit) == (8192 - 100 - 163, 8192 - 4096 - 163)


def test_the_refusal_floor_is_configurable_and_never_above_the_reserve() -> None:
    b = budget({"context_window": 8192, "refusal_output_floor": 1000, "safety_margin": 0}, {})
    assert b.limit == 8192 - 1000
    b = budget({"context_window": 8192, "reserved_output": 10, "safety_margin": 0}, {})
    assert b.limit == b.allowance == 8182
    b = budget({"context_window": 100, "safety_margin": 0}, {"max_tokens": 500})
    assert b.limit == 0


def test_a_count_ratio_scales_the_budget_into_the_proxys_counts() -> None:
    policy = BudgetPolicy.model_validate({"context_window": 10_000, "safety_margin": 0})
    plain = compute_budget(policy, "m", 1000, Models())
    scaled_budget = compute_budget(policy, "m", 1000, Models(), None, 1.25)
    assert scaled_budget.context_window == 10_000 and scaled_budget.count_ratio == 1.25
    assert (scaled_budget.allowance, scaled_budget.limit) == (7200, 7200)  # 9000 / 1.25
    assert scaled_budget.trigger == int(plain.trigger / 1.25)
    assert scaled_budget.target == int(plain.target / 1.25)


# -- what a client is told about its budget -----------------------------------------------------


def test_notes_name_the_window_where_it_is_uncertain_and_the_count_ratio() -> None:
    def notes(source: WindowSource, ratio: float = 1.0, method: str = "tiktoken") -> list[str]:
        manifest = Manifest(policy="p", model="m", mode="reduce", counting_method=method)
        note_budget(manifest, Budget(5000, 0, 0, 5000, 4000, 3000, 5000, source, ratio))
        codes[source, ratio, method] = manifest.note_codes
        return manifest.notes

    codes: dict[tuple[WindowSource, float, str], list[NoteCode]] = {}

    assert notes(WindowSource.policy) == notes(WindowSource.model_map) == []
    assert notes(WindowSource.fallback) == [
        "context window 5000 is the policy's fallback_context_window: neither the model map nor "
        "the upstream knows this model"
    ]
    assert notes(WindowSource.upstream) == ["context window 5000 taken from the upstream"]
    assert notes(WindowSource.upstream_error) == [
        "context window 5000 as stated by the upstream's context-length error for this model"
    ]
    assert notes(WindowSource.policy, 1.25, "estimate") == [
        "budget scaled by the upstream's count ratio 1.250 (usage.prompt_tokens over the proxy's "
        "counts)",
        "tokens estimated (no tokenizer for this model): counts are approximate",
    ]
    assert codes == {
        (WindowSource.policy, 1.0, "tiktoken"): [],
        (WindowSource.model_map, 1.0, "tiktoken"): [],
        (WindowSource.fallback, 1.0, "tiktoken"): [NoteCode.window_fallback],
        (WindowSource.upstream, 1.0, "tiktoken"): [NoteCode.window_upstream],
        (WindowSource.upstream_error, 1.0, "tiktoken"): [NoteCode.window_corrected],
        (WindowSource.policy, 1.25, "estimate"): [
            NoteCode.counts_calibrated,
            NoteCode.estimated_tokens,
        ],
    }


def test_a_stated_window_equal_to_the_known_one_corrects_nothing() -> None:
    assert window_of({}, "m", Told(100_000, stated=True)) == (100_000, WindowSource.model_map)
    assert window_of({"context_window": 9000}, "m", Told(9000, stated=True)) == (
        9000,
        WindowSource.policy,
    )


def test_a_count_ratio_of_two_halves_the_budget() -> None:
    policy = BudgetPolicy.model_validate({"context_window": 10_000, "safety_margin": 0})
    b = compute_budget(policy, "m", 1000, Models(), None, 2.0)
    assert (b.allowance, b.limit, b.count_ratio) == (4500, 4500, 2.0)
    assert (b.trigger, b.target) == (9000 // 2, int(0.7 * 9000) // 2)  # trigger 1.0: the allowance


def test_a_request_is_reduced_over_the_trigger_or_over_a_lower_refusal_limit() -> None:
    # reserved_output 512 (the policy's number) but the request asks for up to 1024 tokens: a
    # prompt between the refusal limit and the trigger is one the provider would refuse
    policy = BudgetPolicy(context_window=4604, reserved_output=512, trigger=0.95)
    budget = compute_budget(policy, "m", 1024, Models())
    assert budget.trigger == 3800 and budget.limit == 4604 - 1024 - 92
    assert budget.reduce_over == budget.limit
    roomy = compute_budget(policy, "m", 256, Models())
    assert roomy.limit > roomy.trigger and roomy.reduce_over == roomy.trigger
    assert Budget(100_000, 0, 0, 100_000, 10, 5).reduce_over == 10  # no limit known: the trigger
