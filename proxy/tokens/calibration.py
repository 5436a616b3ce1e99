"""How the proxy's token counts compare with what the upstream reports, per model.

Every answer that reports `usage` gives a sample, the upstream's prompt tokens over the proxy's
count of the same prompt; a running average (EMA) of the samples is the model's count ratio,
which the budget applies (`engine.budget.compute_budget(count_ratio=...)`): a ratio of 1.1 means
the upstream counts 10% more than the proxy, so the proxy's allowance shrinks by that much.

Bounded on every side: a ratio stays within [`low`, `high`] (0.5..2), samples from small prompts
(framing dominates) or wildly off (another prompt, a broken count) are ignored, a ratio is applied
only after `min_samples`, and at most `max_models` models are remembered (least recently used
out). Memory-only, per process: replicas calibrate each on their own.
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

    def ratio(self, model: str) -> float:
        """The ratio the budget applies for `model`: 1.0 until it has `min_samples` samples."""
        found = self._models.get(model)
        if found is None or found.samples < self._min_samples:
            return 1.0
        return found.ratio

    def observe(self, model: str, counted: int, reported: int | None) -> None:
        """The proxy counted `counted` tokens for a prompt the upstream reports as `reported`."""
        if not model or reported is None or counted < self._min_counted_tokens or reported <= 0:
            return
        sample = reported / counted
        if not _PLAUSIBLE[0] <= sample <= _PLAUSIBLE[1]:
            return
        found = self._models.get(model)
        if found is None:
            found = self._models[model] = ModelCalibration(1.0, 0)
            while len(self._models) > self._max_models:
                self._models.popitem(last=False)
            average = sample
        else:
            self._models.move_to_end(model)
            average = found.ratio + self._alpha * (sample - found.ratio)
        found.ratio = min(max(average, self._low), self._high)
        found.samples += 1

    def snapshot(self) -> dict[str, ModelCalibration]:
        """The models applied (with at least `min_samples` samples), for /metrics."""
        return {
            model: ModelCalibration(c.ratio, c.samples)
            for model, c in list(self._models.items())
            if c.samples >= self._min_samples
        }
