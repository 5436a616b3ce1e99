"""Count calibration: a bounded running ratio of the upstream's prompt tokens to the proxy's."""

from __future__ import annotations

import pytest

from proxy.tokens.calibration import CountCalibration, ModelCalibration


def test_a_ratio_applies_after_min_samples_and_follows_a_running_average() -> None:
    c = CountCalibration(alpha=0.5, min_samples=2)
    c.observe("m", 1000, 1200)
    assert c.ratio("m") == 1.0 and c.snapshot() == {}  # one sample is not enough
    c.observe("m", 1000, 1400)
    assert c.ratio("m") == pytest.approx(1.3)
    assert c.snapshot() == {"m": ModelCalibration(pytest.approx(1.3), 2)}
    assert c.ratio("other") == 1.0


def test_the_ratio_is_clamped_and_implausible_or_small_samples_are_ignored() -> None:
    c = CountCalibration(min_samples=1)
    c.observe("m", 1000, 3000)
    assert c.ratio("m") == 2.0  # clamped to the upper bound
    c = CountCalibration(min_samples=1)
    c.observe("m", 1000, 400)
    assert c.ratio("m") == 0.5  # and to the lower one
    c = CountCalibration(min_samples=1)
    for counted, reported in ((1000, 5000), (1000, 100), (100, 150), (1000, None), (1000, 0)):
        c.observe("m", counted, reported)
    c.observe("", 1000, 1100)
    assert c.snapshot() == {}


def test_models_are_bounded_least_recently_observed_out() -> None:
    c = CountCalibration(min_samples=1, max_models=2)
    c.observe("a", 1000, 1100)
    c.observe("b", 1000, 1200)
    c.observe("a", 1000, 1100)  # "a" is now the most recent
    c.observe("c", 1000, 1300)
    assert sorted(c.snapshot()) == ["a", "c"]
