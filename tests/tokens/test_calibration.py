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
    huge = 10**400  # an upstream's usage may say anything: no OverflowError either
    for counted, reported in ((1000, 5000), (1000, 100), (100, 150), (1000, None), (1000, 0),
                              (1000, huge)):  # fmt: skip
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


def test_pending_samples_are_taken_once_as_a_mean_and_count_per_model() -> None:
    c = CountCalibration()
    c.observe("a", 1000, 1100)
    c.observe("a", 1000, 1300)
    c.observe("b", 1000, 900)
    c.observe("b", 1000, 9000)  # implausible: never pending either
    assert c.take_pending() == {"a": (pytest.approx(1.2), 2), "b": (pytest.approx(0.9), 1)}
    assert c.take_pending() == {}


def test_adopting_a_shared_ratio_replaces_the_local_one_and_counts_its_samples() -> None:
    c = CountCalibration(min_samples=3)
    c.observe("a", 1000, 1100)
    c.adopt("a", 1.4, 7)
    assert c.ratio("a") == 1.4 and c.snapshot() == {"a": ModelCalibration(1.4, 7)}
    c.adopt("fresh", 0.8, 3)  # a model this process never observed
    assert c.ratio("fresh") == 0.8
    for bad in (("a", 2.5, 9), ("a", 0.4, 9), ("a", 1.1, 0), ("", 1.1, 5)):
        c.adopt(*bad)  # outside the bounds, no samples, no model: ignored
    assert c.snapshot() == {"a": ModelCalibration(1.4, 7), "fresh": ModelCalibration(0.8, 3)}


def test_models_to_refresh_are_those_observed_or_asked_for_bounded() -> None:
    c = CountCalibration(max_models=2)
    c.observe("seen", 1000, 1100)
    assert c.ratio("asked") == 1.0
    c.ratio("")
    assert c.models_to_refresh() == ["seen", "asked"]
    c.ratio("newer")
    c.ratio("newest")  # only the two most recently asked are kept
    assert c.models_to_refresh() == ["seen", "newer", "newest"]
