"""The planner never makes a move that does not lower the running total: an eager (`when_seen`)
move or a cut whose savings do not pay for the read tools it switches on is not made, and the log
counts it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from proxy.engine.plan_totals import StepPlan, total_after
from proxy.engine.planner import ReplayLog, plan_horizons


def eager(costs: list[int]) -> StepPlan:
    return StepPlan(costs=costs, limits=[t + 1 for t in range(len(costs))], when_seen=True)


def test_an_eager_move_that_saves_less_than_the_read_tools_cost_is_not_made() -> None:
    # unit 1 shrinks by 60, the read tools cost 155: offloading it would add 95 tokens
    full = [100, 300, 100]
    log = ReplayLog.empty(1)
    kwargs = {"base": 10, "reduced_base": 165, "trigger": 10**6, "target": 10**5}
    assert plan_horizons(full, [eager([100, 240, 100])], log=log, **kwargs) == [0]
    assert log.refused == 1 and log.seen == [[]]
    # one that saves more than the tools cost is made, as it arrives
    log = ReplayLog.empty(1)
    assert plan_horizons(full, [eager([100, 40, 100])], log=log, **kwargs) == [2]
    assert log.refused == 0 and log.seen == [[(1, 2)]]


def test_once_the_read_tools_are_on_every_shrinking_unit_moves_as_it_arrives() -> None:
    # u1 pays for the tools; u3 saves only 10 but costs nothing more to offload then
    full = [100, 900, 100, 100]
    costs = [100, 90, 100, 90]
    kwargs = {"base": 0, "reduced_base": 155, "trigger": 10**6, "target": 10**5}
    log = ReplayLog.empty(1)
    assert plan_horizons(full, [eager(costs)], log=log, **kwargs) == [4]
    assert log.seen == [[(1, 2), (3, 4)]]
    # before u1, u3 alone would not have paid: the same unit first is left as it is
    assert plan_horizons([100, 100, 100, 100], [eager([100, 90, 100, 90])], **kwargs) == [0]


def test_a_cut_that_does_not_lower_the_total_is_refused() -> None:
    # over the trigger, but shrinking every unit frees 30 tokens against 100 of read tools
    shrink = StepPlan(costs=[90, 90, 90], limits=[1, 2, 3])
    log = ReplayLog.empty(1)
    horizons = plan_horizons(
        [100] * 3, [shrink], base=0, reduced_base=100, trigger=250, target=200, log=log
    )
    assert horizons == [0] and log.refused >= 1 and log.cuts == [[]]


def test_two_steps_may_pay_for_the_tools_together() -> None:
    # the first step alone frees too little; with the drop after it, the cut pays
    n = 6
    shrink = StepPlan(costs=[95] * n, limits=[t + 1 for t in range(n)])
    drop = StepPlan(costs=[0] * n, limits=[max(t - 1, 0) for t in range(n)], extra_cost=10)
    horizons = plan_horizons(
        [100] * n, [shrink, drop], base=0, reduced_base=50, trigger=550, target=400
    )
    assert horizons[1] > 0
    assert total_after([100] * n, [shrink, drop], horizons, base=0, reduced_base=50) < 600


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), min_size=1, max_size=30),
    st.integers(0, 300),
    st.integers(100, 3000),
    st.booleans(),
)
def test_the_planned_total_is_never_above_the_unreduced_one(
    units: list[tuple[int, int]], tools: int, trigger: int, eager_first: bool
) -> None:
    """Whatever the costs, the read tools' price and the trigger: a plan that moves anything
    plans fewer tokens than the request has unreduced."""
    full = [a for a, _ in units]
    shrunk = [min(a, b) for a, b in units]
    n = len(full)
    first = StepPlan(shrunk, [t + 1 for t in range(n)], when_seen=eager_first)
    drop = StepPlan([0] * n, [max(t - 1, 0) for t in range(n)], extra_cost=20)
    kwargs = {"base": 30, "reduced_base": 30 + tools}
    horizons = plan_horizons(
        full, [first, drop], trigger=trigger, target=trigger * 7 // 10, **kwargs
    )
    planned = total_after(full, [first, drop], horizons, **kwargs)
    unreduced = total_after(full, [first, drop], [0, 0], **kwargs)
    assert planned == unreduced if not any(horizons) else planned < unreduced
