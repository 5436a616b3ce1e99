"""How the proxy's token counts compare with what each upstream reports, per upstream and model.

Every answer that reports `usage` gives a sample, the upstream's prompt tokens over the proxy's
count of the same prompt, for the upstream that answered, the request's model and the requester
(its contributor: `calibration_rule.contributor_id` of its scope). The ratio a request applies
(`engine.budget.compute_budget(count_ratio=...)`: a ratio of 1.1 means the upstream counts 10%
more than the proxy, so the proxy's allowance shrinks by that much) is its own contributor's
once it has enough samples, else the ratio the other contributors agree on, else 1
(`calibration_rule`): one requester whose upstream reports inflated usage shrinks only its own
allowance.

Bounded on every side: ratios stay within [`low`, `high`] (0.5..2) and move by at most one step
per sample, samples from small prompts (framing dominates) or wildly off (another prompt, a broken
count) are ignored, at most `max_keys` upstream/model pairs are remembered (least recently used
out) and `max_contributors` contributors each. Replicas share their ratios through the store
(`tokens.calibration_sync`): each keeps the samples it observed since the last sync
(`take_pending`), the store merges them by the same rule, and every replica adopts the merged
state (`adopt`), also for pairs it only prepared for (`keys_to_refresh`). The request path only
ever reads memory.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from proxy.tokens.calibration_rule import (
    NO_RATIO,
    AppliedRatio,
    CalibrationKey,
    Contribution,
    KeyCalibration,
    RatioRule,
)

MIN_COUNTED_TOKENS = 256
MAX_KEYS = 1024
_PLAUSIBLE = (0.25, 4.0)
"""A sample outside this range is not a tokenizer difference: ignored."""

Pending = dict[tuple[str, str], dict[str, tuple[float, int]]]
"""Samples not yet shared: per key (`CalibrationKey`), per contributor, (mean, count)."""


@dataclass(frozen=True)
class KeySnapshot:
    """What /metrics shows of one upstream and model (never a contributor)."""

    agreed: float
    contributors: int
    samples: int


@dataclass
class _Pending:
    total: float = 0.0
    count: int = 0


class CountCalibration:
    """The count ratios of one app (read by the preparer, fed by the completions)."""

    def __init__(
        self,
        rule: RatioRule | None = None,
        *,
        min_counted_tokens: int = MIN_COUNTED_TOKENS,
        max_keys: int = MAX_KEYS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.rule = rule or RatioRule()
        self._min_counted_tokens = min_counted_tokens
        self._max_keys = max_keys
        self._clock = clock
        self._keys: OrderedDict[CalibrationKey, KeyCalibration] = OrderedDict()
        self._pending: dict[CalibrationKey, dict[str, _Pending]] = {}
        self._asked: OrderedDict[CalibrationKey, None] = OrderedDict()

    def applied(self, key: CalibrationKey, contributor: str) -> AppliedRatio:
        """The ratio a request of `contributor` ("" for none) for `key` applies."""
        self._remember_asked(key)
        found = self._keys.get(key)
        return NO_RATIO if found is None else found.applied(contributor)

    def observe(
        self, key: CalibrationKey, contributor: str, counted: int, reported: int | None
    ) -> None:
        """The proxy counted `counted` tokens for a prompt of `contributor` that the upstream of
        `key` reports as `reported`. Requests without a contributor teach nothing."""
        if not key.model or not contributor or reported is None:
            return
        if counted < self._min_counted_tokens or reported <= 0:
            return
        if reported > counted * _PLAUSIBLE[1]:  # before dividing: a 400-digit count overflows
            return
        sample = reported / counted
        if not _PLAUSIBLE[0] <= sample <= _PLAUSIBLE[1]:
            return
        found = self._keys.get(key)
        if found is None:
            found = self._new_key(key)
        else:
            self._keys.move_to_end(key)
        if found.observe(contributor, sample, 1, self._clock()):
            self._add_pending(key, contributor, sample)

    def _add_pending(self, key: CalibrationKey, contributor: str, sample: float) -> None:
        per_key = self._pending.get(key)
        if per_key is None and len(self._pending) < self._max_keys:
            per_key = self._pending[key] = {}
        if per_key is None:
            return
        pending = per_key.get(contributor)
        if pending is None and len(per_key) < self.rule.max_contributors:
            pending = per_key[contributor] = _Pending()
        if pending is not None:
            pending.total += sample
            pending.count += 1

    def take_pending(self) -> Pending:
        """The samples observed since the last call: per key and contributor, (mean, count);
        then forgets them."""
        pending, self._pending = self._pending, {}
        return {
            key: {who: (p.total / p.count, p.count) for who, p in per_key.items()}
            for key, per_key in pending.items()
        }

    def keys_to_refresh(self) -> list[CalibrationKey]:
        """The keys this process observed or prepared for: those whose shared state it wants."""
        return list(dict.fromkeys([*self._keys, *self._asked]))

    def adopt(
        self,
        shared_key: tuple[str, str],
        agreed: float,
        contributors: Mapping[str, tuple[float, float, int, float]],
    ) -> None:
        """Take the shared state of `key` (merged from every replica's samples) as this one's:
        the agreed ratio and each contributor's (ratio, average, samples, updated). Values
        outside the rule's bounds are left out."""
        rule, key = self.rule, CalibrationKey(*shared_key)
        if not key.model or not rule.low <= agreed <= rule.high:
            return
        kept = {
            who: Contribution(ratio, average, samples, updated)
            for who, (ratio, average, samples, updated) in contributors.items()
            if who and samples > 0 and rule.low <= min(ratio, average)
            and max(ratio, average) <= rule.high
        }
        if len(kept) > rule.max_contributors:
            newest = sorted(kept, key=lambda who: kept[who].updated)[-rule.max_contributors :]
            kept = {who: kept[who] for who in newest}
        found = self._keys.get(key) or self._new_key(key)
        found.contributors = kept
        found.agreed = agreed
        found.agreeing = len(found.calibrated())

    def _new_key(self, key: CalibrationKey) -> KeyCalibration:
        found = self._keys[key] = KeyCalibration(self.rule)
        while len(self._keys) > self._max_keys:
            self._keys.popitem(last=False)
        return found

    def _remember_asked(self, key: CalibrationKey) -> None:
        if not key.model:
            return
        if key in self._asked:
            self._asked.move_to_end(key)
            return
        self._asked[key] = None
        while len(self._asked) > self._max_keys:
            self._asked.popitem(last=False)

    def snapshot(self) -> dict[CalibrationKey, KeySnapshot]:
        """The keys with at least one calibrated contributor, for /metrics."""
        found: dict[CalibrationKey, KeySnapshot] = {}
        for key, state in list(self._keys.items()):
            calibrated = len(state.calibrated())
            if calibrated:
                found[key] = KeySnapshot(state.agreed, calibrated, state.samples)
        return found
