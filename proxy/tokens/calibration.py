"""How the proxy's token counts compare with what the upstream reports, per model.

Every answer that reports `usage` gives a sample, the upstream's prompt tokens over the proxy's
count of the same prompt; a running average (EMA) of the samples is the model's count ratio,
which the budget applies (`engine.budget.compute_budget(count_ratio=...)`): a ratio of 1.1 means
the upstream counts 10% more than the proxy, so the proxy's allowance shrinks by that much.

Bounded on every side: a ratio stays within [`low`, `high`] (0.5..2), samples from small prompts
(framing dominates) or wildly off (another prompt, a broken count) are ignored, a ratio is applied
only after `min_samples`, and at most `max_models` models are remembered (least recently used
out). Replicas share their ratios through the store (`tokens.calibration_sync`): each keeps the
samples it observed since the last sync (`take_pending`), the store merges them into one running
average per model, and every replica adopts the merged value (`adopt`), also for models it only
prepared for (`models_to_refresh`). The request path only ever reads memory.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

ALPHA = 0.2
LOW, HIGH = 0.5, 2.0
MIN_COUNTED_TOKENS = 256
MIN_SAMPLES = 3
MAX_MODELS = 1024
_PLAUSIBLE = (0.25, 4.0)
"""A sample outside this range is not a tokenizer difference: ignored."""


@dataclass
class ModelCalibration:
    ratio: float
    """Upstream prompt tokens per proxy-counted token (running average, clamped)."""
    samples: int


@dataclass(frozen=True)
class RatioRule:
    """How samples move a ratio, for whoever merges them (this process or the shared store)."""

    alpha: float
    low: float
    high: float


@dataclass
class _Pending:
    total: float = 0.0
    count: int = 0


class CountCalibration:
    """The count ratios of one app's models (read by the preparer, fed by the completions)."""

    def __init__(
        self,
        *,
        alpha: float = ALPHA,
        low: float = LOW,
        high: float = HIGH,
        min_counted_tokens: int = MIN_COUNTED_TOKENS,
        min_samples: int = MIN_SAMPLES,
        max_models: int = MAX_MODELS,
    ) -> None:
        self._alpha = alpha
        self._low, self._high = low, high
        self._min_counted_tokens = min_counted_tokens
        self._min_samples = min_samples
        self._max_models = max_models
        self._models: OrderedDict[str, ModelCalibration] = OrderedDict()
        self._pending: dict[str, _Pending] = {}
        self._asked: OrderedDict[str, None] = OrderedDict()

    @property
    def rule(self) -> RatioRule:
        return RatioRule(self._alpha, self._low, self._high)

    def ratio(self, model: str) -> float:
        """The ratio the budget applies for `model`: 1.0 until it has `min_samples` samples."""
        self._remember_asked(model)
        found = self._models.get(model)
        if found is None or found.samples < self._min_samples:
            return 1.0
        return found.ratio

    def observe(self, model: str, counted: int, reported: int | None) -> None:
        """The proxy counted `counted` tokens for a prompt the upstream reports as `reported`."""
        if not model or reported is None or counted < self._min_counted_tokens or reported <= 0:
            return
        if reported > counted * _PLAUSIBLE[1]:  # before dividing: a 400-digit count overflows
            return
        sample = reported / counted
        if not _PLAUSIBLE[0] <= sample <= _PLAUSIBLE[1]:
            return
        pending = self._pending.get(model)
        if pending is None and len(self._pending) < self._max_models:
            pending = self._pending[model] = _Pending()
        if pending is not None:
            pending.total += sample
            pending.count += 1
        found = self._models.get(model)
        if found is None:
            found = self._new_model(model)
            average = sample
        else:
            self._models.move_to_end(model)
            average = found.ratio + self._alpha * (sample - found.ratio)
        found.ratio = min(max(average, self._low), self._high)
        found.samples += 1

    def take_pending(self) -> dict[str, tuple[float, int]]:
        """The samples observed since the last call, per model: (mean, count); then forgets them."""
        pending, self._pending = self._pending, {}
        return {model: (p.total / p.count, p.count) for model, p in pending.items()}

    def models_to_refresh(self) -> list[str]:
        """The models this process observed or prepared for: those whose shared ratio it wants."""
        return list(dict.fromkeys([*self._models, *self._asked]))

    def adopt(self, model: str, ratio: float, samples: int) -> None:
        """Take the shared ratio of `model` (merged from every replica's samples) as this one's."""
        if not model or samples <= 0 or not self._low <= ratio <= self._high:
            return
        found = self._models.get(model)
        if found is None:
            found = self._new_model(model)
        found.ratio, found.samples = ratio, samples

    def _new_model(self, model: str) -> ModelCalibration:
        found = self._models[model] = ModelCalibration(1.0, 0)
        while len(self._models) > self._max_models:
            self._models.popitem(last=False)
        return found

    def _remember_asked(self, model: str) -> None:
        if not model:
            return
        if model in self._asked:
            self._asked.move_to_end(model)
            return
        self._asked[model] = None
        while len(self._asked) > self._max_models:
            self._asked.popitem(last=False)

    def snapshot(self) -> dict[str, ModelCalibration]:
        """The models applied (with at least `min_samples` samples), for /metrics."""
        return {
            model: ModelCalibration(c.ratio, c.samples)
            for model, c in list(self._models.items())
            if c.samples >= self._min_samples
        }
