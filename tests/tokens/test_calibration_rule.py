"""The calibration rule: bounded steps, the agreed ratio of several contributors, bounded keys."""

from __future__ import annotations

import pytest

from proxy.tokens.calibration_rule import (
    MAX_STEP,
    AppliedRatio,
    Contribution,
    KeyCalibration,
    RatioRule,
    RatioSource,
    contributor_id,
)

RULE = RatioRule()


def moved(ratio: float, samples: int, sample: float, count: int = 1, average: float = 1.0) -> float:
    learned = Contribution(ratio, average if samples else 1.0, samples, 0.0)
    RULE.moved(learned, sample, count)
    assert learned.samples == samples + count
    return learned.ratio


def test_a_sample_moves_a_ratio_by_at_most_one_step_toward_the_running_average() -> None:
    assert moved(1.0, 0, 3.0) == pytest.approx(1.0 + MAX_STEP)
    assert moved(1.0, 0, 0.25) == pytest.approx(1.0 - MAX_STEP)
    assert moved(1.0, 0, 1.05) == pytest.approx(1.05)  # within a step: the sample itself
    assert moved(1.0, 0, 3.0, count=4) == pytest.approx(1.0 + 4 * MAX_STEP)
    assert moved(1.0, 0, 1.3, count=3) == pytest.approx(1.3)  # steps up to the average
    assert moved(1.9, 10, 3.0, count=5, average=2.0) == 2.0  # the average is clamped to `high`
    # Past the first 1/alpha samples, the average is an exponential one.
    assert moved(1.2, 10, 1.3, average=1.2) == pytest.approx(1.2 + 0.2 * 0.1)
    learned = Contribution(1.0, 1.0, 0, 0.0)
    RULE.moved(learned, 1.6, 2)
    assert (learned.average, learned.ratio) == (pytest.approx(1.6), pytest.approx(1.2))
    RULE.moved(learned, 0.7, 1)  # the average of (1.6, 1.6, 0.7) is 1.3: one more step, no more
    assert (learned.average, learned.ratio) == (pytest.approx(1.3), pytest.approx(1.3))
    RULE.moved(learned, 0.4, 1)  # the average is 1.075: the ratio comes down one step
    assert (learned.average, learned.ratio) == (pytest.approx(1.075), pytest.approx(1.2))


def test_the_target_is_the_median_of_a_quorum_else_one() -> None:
    assert RULE.target([]) == (1.0, 0)
    assert RULE.target([2.0, 2.0]) == (1.0, 2)  # two contributors do not make a quorum
    assert RULE.target([2.0, 1.1, 2.0]) == (2.0, 3)
    assert RULE.target([1.1, 2.0, 1.2, 1.0]) == (pytest.approx(1.15), 4)


def test_the_agreed_ratio_moves_at_most_one_step_per_sample() -> None:
    assert RULE.toward(1.0, 2.0, 1) == pytest.approx(1.0 + MAX_STEP)
    assert RULE.toward(1.0, 2.0, 3) == pytest.approx(1.0 + 3 * MAX_STEP)
    assert RULE.toward(1.5, 1.45, 1) == pytest.approx(1.45)
    assert RULE.toward(1.5, 1.0, 2) == pytest.approx(1.5 - 2 * MAX_STEP)


def test_a_contributor_applies_its_own_ratio_others_the_agreed_one() -> None:
    key = KeyCalibration(RULE)
    for _ in range(4):
        key.observe("poisoner", 3.0, 1, now=100.0)
    assert key.applied("poisoner") == AppliedRatio(pytest.approx(1.4), RatioSource.own)
    assert key.applied("honest") == AppliedRatio(1.0, RatioSource.none)
    assert key.applied("") == AppliedRatio(1.0, RatioSource.none)


def test_three_calibrated_contributors_make_the_agreed_ratio_follow_their_median() -> None:
    key = KeyCalibration(RULE)
    for who in ("a", "b"):
        key.observe(who, 1.3, 3, now=100.0)
    assert key.applied("c") == AppliedRatio(1.0, RatioSource.none)  # two agree: not enough
    key.observe("c", 1.3, 3, now=100.0)  # the third: the agreed ratio starts to follow
    assert key.agreeing == 3
    agreed = AppliedRatio(pytest.approx(1.0 + 3 * MAX_STEP), RatioSource.agreed)
    assert key.applied("new") == agreed
    assert key.applied("a") == AppliedRatio(pytest.approx(1.3), RatioSource.own)


def test_a_full_key_admits_no_newcomer_until_a_contributor_falls_silent() -> None:
    rule = RatioRule(max_contributors=2, ttl_seconds=60)
    key = KeyCalibration(rule)
    assert key.observe("a", 1.2, 3, now=0.0) and key.observe("b", 1.2, 3, now=30.0)
    assert not key.observe("c", 2.0, 5, now=59.0)  # no room: nothing moves, nobody leaves
    assert sorted(key.contributors) == ["a", "b"] and key.agreed == 1.0
    assert key.observe("c", 2.0, 1, now=61.0)  # "a" had no sample for 60 s: forgotten
    assert sorted(key.contributors) == ["b", "c"]


def test_contributors_are_hashes_of_scopes() -> None:
    assert contributor_id("acme") == contributor_id("acme") != contributor_id("acme2")
    assert len(contributor_id("acme")) == 16 and "acme" not in contributor_id("acme")
