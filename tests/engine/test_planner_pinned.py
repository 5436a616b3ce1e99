"""The planner replays remembered moves (`Pinned`) as they were, whatever the budget is now, and
plans only the units after them; its slack is the previous plan's over-count."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from proxy.engine.plan_totals import StepPlan, total_after
from proxy.engine.planner import Pinned, ReplayLog, plan_horizons


def drop_step(n: int, keep_last: int = 1, extra: int = 10) -> StepPlan:
    return StepPlan(
        costs=[0] * n, limits=[max(t - keep_last + 1, 0) for t in range(n)], extra_cost=extra
    )


def replay(
    full: list[int], trigger: int, pinned: Pinned | None = None, steps: list[StepPlan] | None = None
) -> tuple[list[int], ReplayLog]:
    steps = steps or [drop_step(len(full))]
    log = ReplayLog.empty(len(steps))
    horizons = plan_horizons(
        full, steps, base=50, reduced_base=60, trigger=trigger, target=trigger * 7 // 10,
        pinned=pinned, log=log,
    )  # fmt: skip
    return horizons, log


def test_remembered_cuts_stay_put_when_the_trigger_moves() -> None:
    full = [100] * 20
    _, first = replay(full[:15], 1000)
    assert first.cuts[0], "the history was cut"
    pinned = Pinned(15, first.cuts, first.seen)
    moved = []
    for trigger in (900, 1100, 950, 1050):  # the count ratio moving 1.1 .. 0.9
        moved.append(replay(full[:15], trigger)[1].cuts != first.cuts)
        _, log = replay(full[:15], trigger, pinned)
        assert log.cuts == first.cuts  # the same cuts at the same time points
    assert any(moved)  # replayed afresh, they would have moved


def test_the_units_after_the_remembered_ones_are_planned_under_the_current_trigger() -> None:
    full = [100] * 24
    _, first = replay(full[:15], 1000)
    pinned = Pinned(15, first.cuts, first.seen)
    # a lower trigger now: the first new unit that crosses it is cut at once
    horizons, log = replay(full, 800, pinned)
    new = [(t, h) for t, h in log.cuts[0] if t >= 15]
    assert new and new[0][0] == 15
    assert log.cuts[0][: len(first.cuts[0])] == first.cuts[0]
    assert total_after(full, [drop_step(24)], horizons, base=50, reduced_base=60) <= 800


def test_a_request_under_its_trigger_keeps_its_remembered_cuts() -> None:
    full = [100] * 16
    old, first = replay(full, 1000)
    # the trigger went up so far that nothing would be cut now: the old cuts stand all the same
    assert replay(full, 5000)[0] == [0]
    assert replay(full, 5000, Pinned(16, first.cuts, first.seen))[0] == old


def test_slack_counts_the_remembered_form_as_it_was_sent() -> None:
    """The plan sizes a stand-in item for the widest numbers; the slack is how much less the
    sent one had. While no new cut is made, the trigger is checked against that."""
    full = [100] * 14
    _, first = replay(full[:12], 1000)
    over = total_after(
        full, [drop_step(14)], [first.cuts[0][-1][1]], base=50, reduced_base=60
    )  # the remembered form plus two units, as planned
    pinned = Pinned(12, first.cuts, first.seen, slack=over - 1000)
    _, log = replay(full, 1000, pinned)
    assert log.cuts == first.cuts  # exactly at the trigger as sent: no new cut
    _, without = replay(full, 1000, Pinned(12, first.cuts, first.seen))
    assert without.cuts[0] != first.cuts[0]  # planned count over the trigger: a new cut


def test_remembered_moves_never_pass_what_the_step_allows_now() -> None:
    full = [100] * 10
    pinned = Pinned(10, [[(9, 9)]], [[]])  # e.g. made by a relaxed (last resort) step
    horizons, _ = replay(full, 10**6, pinned, [drop_step(10, keep_last=4)])
    assert horizons == [6]


def test_a_record_longer_than_the_request_is_ignored() -> None:
    full = [100] * 5
    assert replay(full, 10**6, Pinned(9, [[(3, 2)]], [[]]))[0] == [0]


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.integers(0, 400), min_size=2, max_size=40),
    st.integers(400, 3000),
    st.lists(st.floats(0.8, 1.25), min_size=1, max_size=8),
)
def test_cut_points_are_stable_under_a_moving_ratio(
    costs: list[int], trigger: int, ratios: list[float]
) -> None:
    """A conversation growing unit by unit, each request planned under its own trigger (the
    ratio moving) with the previous request's moves pinned: every request's moves over the units
    the previous one had are exactly the previous one's."""
    n = len(costs)
    starts = list(range(0, n, 2))
    previous: ReplayLog | None = None
    for m in range(1, n + 1):
        steps = [
            StepPlan(costs=[c // 3 for c in costs[:m]], limits=[t + 1 for t in range(m)]),
            StepPlan(
                costs=[0] * m,
                limits=[max([s for s in starts if s <= t - 2], default=0) for t in range(m)],
                cuts=[s for s in starts if 0 < s < m],
                extra_cost=15,
            ),
        ]
        ratio = ratios[m % len(ratios)]
        pinned = None if previous is None else Pinned(m - 1, previous.cuts, previous.seen)
        log = ReplayLog.empty(2)
        plan_horizons(
            costs[:m], steps, base=5, reduced_base=9, trigger=int(trigger / ratio),
            target=int(trigger * 0.7 / ratio), pinned=pinned, log=log,
        )  # fmt: skip
        if previous is not None:
            for old, new in zip(previous.cuts, log.cuts, strict=True):
                assert [c for c in new if c[0] < m - 1] == old
        previous = log
