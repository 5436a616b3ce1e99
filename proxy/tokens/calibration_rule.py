"""How samples move count ratios, for one upstream and model (`CalibrationKey`).

A ratio is learned per contributor (a hash of the requester's scope, `contributor_id`): it
starts at 1 (the proxy's own count) and each sample moves it toward the samples' running average
(their mean over the first 1/alpha samples, then an exponential average) by at most `step`,
always within [`low`, `high`]. A contributor's requests apply its own ratio once it has
`min_samples` samples (`RatioSource.own`). Everyone else's requests apply the *agreed* ratio
(`RatioSource.agreed`): it follows the median of the calibrated contributors' ratios when at
least `quorum` distinct contributors are calibrated, 1 otherwise, and it too moves by at most
one step per sample. So one contributor whose upstream reports anything moves its own allowance,
and everyone else's by at most one step per answer toward a median it alone cannot shift. At
most `max_contributors` contributors are kept per key: a new one is admitted only while there is
room (an entry leaves when it has had no sample for `ttl_seconds`), so no newcomer ever pushes
out a contributor whose own ratio applies.

This process applies the rule sample by sample (`KeyCalibration.observe`); the shared store
applies the same rule, in Lua, to the samples replicas push (`artifacts.redis_ratios`), n
samples of one mean as n steps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

ALPHA = 0.2
LOW, HIGH = 0.5, 2.0
MAX_STEP = 0.1
"""The most one sample moves a ratio (a contributor's own, or the agreed one)."""
MIN_SAMPLES = 3
QUORUM = 3
"""Distinct calibrated contributors before the agreed ratio follows their median."""
MAX_CONTRIBUTORS = 32
TTL_SECONDS = 7 * 24 * 3600
"""A contributor without a sample for this long is forgotten."""
MAX_STEPS_PER_MERGE = 100
"""n samples of one mean move a ratio as min(n, this) steps (more change nothing measurable)."""


class CalibrationKey(NamedTuple):
    """What a ratio is learned for: the upstream's configured name and the request's model."""

    upstream: str
    model: str


class RatioSource(StrEnum):
    """Where a request's count ratio came from (the manifest's `count_ratio_source`)."""

    own = "own"
    """The requester's own answers (at least `min_samples`)."""
    agreed = "agreed"
    """The agreed ratio of the other contributors of this upstream and model."""
    none = "none"
    """Nothing learned (or nothing agreed): 1."""
    pinned = "pinned"
    """The policy's `budget.count_ratio`."""
    stated = "stated"
    """A retry after an overflow error that stated the prompt's size: at least the ratio of
    that size to the proxy's count of the refused prompt."""


@dataclass(frozen=True)
class AppliedRatio:
    value: float = 1.0
    source: RatioSource = RatioSource.none


NO_RATIO = AppliedRatio()


def contributor_id(scope: str) -> str:
    """The contributor a requester's samples count for: 16 hex of SHA-256 of its scope (never a
    key; the scope itself is a tenant's name or a hash of a credential)."""
    return hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class RatioRule:
    """The numbers of the rule, for whoever applies it (this process or the shared store)."""

    alpha: float = ALPHA
    low: float = LOW
    high: float = HIGH
    step: float = MAX_STEP
    min_samples: int = MIN_SAMPLES
    quorum: int = QUORUM
    max_contributors: int = MAX_CONTRIBUTORS
    ttl_seconds: float = TTL_SECONDS

    def moved(self, learned: Contribution, sample: float, count: int = 1) -> None:
        """`learned` after `count` more samples of mean `sample`: each one updates the running
        average and moves the ratio toward it by at most one step."""
        ratio, average, first = learned.ratio, learned.average, learned.samples
        for n in range(first, first + min(count, MAX_STEPS_PER_MERGE)):
            weight = max(1.0 / (n + 1), self.alpha)
            average = min(max(average + weight * (sample - average), self.low), self.high)
            ratio += min(max(average - ratio, -self.step), self.step)
        learned.ratio, learned.average = ratio, average
        learned.samples += count

    def target(self, ratios: Iterable[float]) -> tuple[float, int]:
        """What the agreed ratio follows, given the calibrated contributors' ratios: their
        median when there are at least `quorum` of them, else 1; and how many there are."""
        ordered = sorted(ratios)
        n = len(ordered)
        if n < self.quorum or n == 0:
            return 1.0, n
        middle = n // 2
        median = ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2
        return median, n

    def toward(self, agreed: float, target: float, samples: int) -> float:
        """The agreed ratio after `samples` samples: at most one step each toward `target`."""
        most = self.step * samples
        return min(max(agreed + min(max(target - agreed, -most), most), self.low), self.high)


@dataclass
class Contribution:
    ratio: float
    """What its requests apply: `average` reached by steps of at most `RatioRule.step`."""
    average: float
    """The running average of its samples."""
    samples: int
    updated: float
    """When its last sample came (seconds since the epoch: replicas compare them)."""


@dataclass
class KeyCalibration:
    """The contributors of one upstream and model, and the ratio they agree on."""

    rule: RatioRule
    contributors: dict[str, Contribution] = field(default_factory=dict)
    agreed: float = 1.0
    agreeing: int = 0
    """How many calibrated contributors the agreed ratio last followed."""

    def applied(self, contributor: str) -> AppliedRatio:
        """The ratio a request of `contributor` ("" for none) applies."""
        own = self.contributors.get(contributor) if contributor else None
        if own is not None and own.samples >= self.rule.min_samples:
            return AppliedRatio(own.ratio, RatioSource.own)
        if self.agreeing >= self.rule.quorum or self.agreed != 1.0:
            return AppliedRatio(self.agreed, RatioSource.agreed)
        return NO_RATIO

    def observe(self, contributor: str, mean: float, count: int, now: float) -> bool:
        """`count` samples of mean `mean` from `contributor`; False when it has no room."""
        self.forget_older_than(now - self.rule.ttl_seconds)
        found = self.contributors.get(contributor)
        if found is None:
            if len(self.contributors) >= self.rule.max_contributors:
                return False
            found = self.contributors[contributor] = Contribution(1.0, 1.0, 0, now)
        self.rule.moved(found, mean, count)
        found.updated = max(found.updated, now)
        target, self.agreeing = self.rule.target(self.calibrated())
        self.agreed = self.rule.toward(self.agreed, target, count)
        return True

    def calibrated(self) -> list[float]:
        least = self.rule.min_samples
        return [c.ratio for c in self.contributors.values() if c.samples >= least]

    def forget_older_than(self, when: float) -> None:
        stale = [name for name, c in self.contributors.items() if c.updated < when]
        for name in stale:
            del self.contributors[name]

    @property
    def samples(self) -> int:
        return sum(c.samples for c in self.contributors.values())
