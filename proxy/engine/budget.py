"""The token budget of one request: window, reserved output, allowance, trigger and target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from proxy.engine.policy import BudgetPolicy



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


def _requested_output(body: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def compute_budget(policy: BudgetPolicy, body: dict[str, Any], models: ModelLookup) -> Budget:
    model = body.get("model")
    window = policy.context_window
    if window == "auto":
        info = models.lookup(model) if isinstance(model, str) else None
        window = getattr(info, "context_window", None) or policy.fallback_context_window
    reserved = policy.reserved_output
    if reserved == "auto":
        requested = _requested_output(body)
        # Without max tokens in the request, never reserve more than half the window: a small
        # local model (n_ctx 2048) must not have every request refused by a 4096 default.
        default = min(policy.default_reserved_output, window // 2)
        reserved = default if requested is None else requested
    margin = scaled(policy.safety_margin, window)
    allowance = max(window - reserved - margin, 0)
    trigger = scaled(policy.trigger, allowance)
    target = min(scaled(policy.target, allowance), trigger)
    return Budget(window, reserved, margin, allowance, trigger, target)
