"""Count calibration: bounded running ratios of the upstream's prompt tokens to the proxy's, per
upstream, model and contributor; one contributor's answers move only its own allowance."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from proxy.tokens.calibration import CountCalibration, KeySnapshot
from proxy.tokens.calibration_rule import (
    MAX_STEP,
    AppliedRatio,
    CalibrationKey,
    RatioRule,
    RatioSource,
)

M = CalibrationKey("fake", "m")
WIDE = RatioRule(step=10.0)
"""A rule whose steps never bind: the plain running average."""


def own(value: float) -> AppliedRatio:
    return AppliedRatio(pytest.approx(value), RatioSource.own)


def test_a_ratio_applies_after_min_samples_and_follows_a_running_average() -> None:
    c = CountCalibration(RatioRule(alpha=0.5, min_samples=2, step=10.0))
    c.observe(M, "a", 1000, 1200)
    assert c.applied(M, "a") == AppliedRatio() and c.snapshot() == {}  # one sample: not enough
    c.observe(M, "a", 1000, 1400)
    assert c.applied(M, "a") == own(1.3)
    assert c.snapshot() == {M: KeySnapshot(1.0, 1, 2)}  # nobody else agrees: 1.0 for others
    assert c.applied(CalibrationKey("fake", "other"), "a") == AppliedRatio()


def test_the_ratio_is_clamped_and_implausible_or_small_samples_are_ignored() -> None:
    c = CountCalibration(RatioRule(min_samples=1, step=10.0))
    c.observe(M, "a", 1000, 3000)
    assert c.applied(M, "a") == own(2.0)  # clamped to the upper bound
    c = CountCalibration(RatioRule(min_samples=1, step=10.0))
    c.observe(M, "a", 1000, 400)
    assert c.applied(M, "a") == own(0.5)  # and to the lower one
    c = CountCalibration(RatioRule(min_samples=1))
    huge = 10**400  # an upstream's usage may say anything: no OverflowError either
    for counted, reported in ((1000, 5000), (1000, 100), (100, 150), (1000, None), (1000, 0),
                              (1000, huge)):  # fmt: skip
        c.observe(M, "a", counted, reported)
    c.observe(CalibrationKey("fake", ""), "a", 1000, 1100)
    c.observe(M, "", 1000, 1100)  # a request without a credential teaches nothing
    assert c.snapshot() == {} and c.take_pending() == {}


def test_one_contributors_inflated_usage_moves_only_its_own_allowance() -> None:
    c = CountCalibration()
    for _ in range(4):  # the upstream of one tenant reports 3x the proxy's count
        c.observe(M, "poisoner", 1000, 3000)
    assert c.applied(M, "poisoner") == own(1.0 + 4 * MAX_STEP)  # a bounded step per answer
    for other in ("honest", ""):
        assert c.applied(M, other) == AppliedRatio(1.0, RatioSource.none)
    for _ in range(40):
        c.observe(M, "poisoner", 1000, 3000)
    assert c.applied(M, "poisoner") == own(2.0)
    assert c.applied(M, "honest") == AppliedRatio(1.0, RatioSource.none)


def test_ratios_are_kept_per_upstream() -> None:
    c = CountCalibration(WIDE)
    for _ in range(3):
        c.observe(CalibrationKey("local", "m"), "a", 1000, 1500)
    assert c.applied(CalibrationKey("local", "m"), "a") == own(1.5)
    assert c.applied(M, "a") == AppliedRatio()


def test_a_shift_applies_to_others_once_three_contributors_agree_one_step_per_sample() -> None:
    c = CountCalibration()
    for who in ("a", "b", "c"):
        for _ in range(6):
            c.observe(M, who, 1000, 1300)
        agreed = c.applied(M, "newcomer")
        if who != "c":
            assert agreed == AppliedRatio(1.0, RatioSource.none)
    # The third made a quorum: from then on each sample moved the agreed ratio one step.
    assert agreed == AppliedRatio(pytest.approx(1.3), RatioSource.agreed)
    for _ in range(20):  # a fourth contributor reporting 2x cannot move the median
        c.observe(M, "poisoner", 1000, 2000)
    assert c.applied(M, "newcomer") == AppliedRatio(pytest.approx(1.3), RatioSource.agreed)
    assert c.applied(M, "poisoner") == own(2.0) and c.applied(M, "a") == own(1.3)


def test_keys_are_bounded_least_recently_observed_out() -> None:
    c = CountCalibration(RatioRule(min_samples=1), max_keys=2)
    a, b, d = (CalibrationKey("fake", name) for name in "abd")
    c.observe(a, "x", 1000, 1100)
    c.observe(b, "x", 1000, 1100)
    c.observe(a, "x", 1000, 1100)  # "a" is now the most recent
    c.observe(d, "x", 1000, 1100)
    assert sorted(key.model for key in c.snapshot()) == ["a", "d"]


def test_pending_samples_are_taken_once_as_a_mean_and_count_per_key_and_contributor() -> None:
    c = CountCalibration()
    other = CalibrationKey("fake", "b")
    c.observe(M, "x", 1000, 1100)
    c.observe(M, "x", 1000, 1300)
    c.observe(M, "y", 1000, 900)
    c.observe(other, "x", 1000, 900)
    c.observe(other, "x", 1000, 9000)  # implausible: never pending either
    assert c.take_pending() == {
        M: {"x": (pytest.approx(1.2), 2), "y": (pytest.approx(0.9), 1)},
        other: {"x": (pytest.approx(0.9), 1)},
    }
    assert c.take_pending() == {}


def test_adopting_the_shared_state_replaces_the_local_one() -> None:
    c = CountCalibration()
    c.observe(M, "x", 1000, 1100)
    c.adopt(M, 1.4, {"x": (1.25, 1.3, 7, 10.0), "y": (1.5, 1.5, 3, 10.0), "z": (1.1, 1.5, 1, 10.0)})
    assert c.applied(M, "x") == own(1.25) and c.applied(M, "y") == own(1.5)
    assert c.applied(M, "z") == AppliedRatio(1.4, RatioSource.agreed)  # too few of its own
    assert c.snapshot() == {M: KeySnapshot(1.4, 2, 11)}
    fresh = CalibrationKey("fake", "fresh")
    c.adopt(fresh, 0.8, {"x": (0.8, 0.8, 3, 10.0)})  # a key this process never observed
    assert c.applied(fresh, "x") == own(0.8)
    for agreed, entries in ((2.5, {}), (0.4, {})):
        c.adopt(M, agreed, entries)  # an agreed ratio outside the bounds: ignored
    c.adopt(CalibrationKey("fake", ""), 1.1, {"x": (1.1, 1.1, 5, 10.0)})  # no model: ignored
    bad = {"x": (2.5, 2.5, 9, 10.0), "w": (1.1, 0.1, 9, 10.0), "y": (1.1, 1.1, 0, 10.0)}
    c.adopt(fresh, 1.0, {**bad, "": (1.1, 1.1, 5, 10.0)})
    assert c.applied(fresh, "x") == c.applied(fresh, "y") == AppliedRatio(1.0, RatioSource.none)
    assert c.snapshot() == {M: KeySnapshot(1.4, 2, 11)}


def test_keys_to_refresh_are_those_observed_or_asked_for_bounded() -> None:
    c = CountCalibration(max_keys=2)
    seen, asked, newer, newest = (CalibrationKey("u", m) for m in ("seen", "asked", "n", "nn"))
    c.observe(seen, "x", 1000, 1100)
    assert c.applied(asked, "x") == AppliedRatio()
    c.applied(CalibrationKey("u", ""), "x")
    assert c.keys_to_refresh() == [seen, asked]
    c.applied(newer, "x")
    c.applied(newest, "x")  # only the two most recently asked are kept
    assert c.keys_to_refresh() == [seen, newer, newest]


SAMPLES = st.lists(
    st.tuples(st.integers(0, 10**6), st.one_of(st.none(), st.integers(-10, 10**7))), max_size=40
)


@settings(max_examples=examples(300))
@given(
    honest=st.lists(st.tuples(st.floats(0.3, 3.0), st.integers(1, 8)), max_size=6),
    reports=SAMPLES,
    poisoner_first=st.booleans(),
)
def test_whatever_one_contributor_reports_others_move_at_most_one_step_per_answer(
    honest: list[tuple[float, int]], reports: list[tuple[int, int | None]], poisoner_first: bool
) -> None:
    c = CountCalibration(RatioRule(max_contributors=5), clock=lambda: 1000.0)
    if poisoner_first:
        c.observe(M, "poisoner", 1000, 1500)
    for i, (ratio, count) in enumerate(honest):
        for _ in range(count):
            c.observe(M, f"honest-{i}", 1000, round(1000 * ratio))
    observers = ["honest-0", "honest-1", "newcomer", ""]
    before = [c.applied(M, who).value for who in observers]
    for counted, reported in reports:
        c.observe(M, "poisoner", counted, reported)
        after = [c.applied(M, who).value for who in observers]
        for old, new in zip(before, after, strict=True):
            assert abs(new - old) <= MAX_STEP + 1e-9
        before = after
