"""The horizon planner: hysteresis, limits, cuts, at_least, determinism."""

from __future__ import annotations

import dataclasses
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from proxy.engine.cut_choice import unchanged_prefix
from proxy.engine.growth import GrowthSizing
from proxy.engine.plan_totals import StepPlan, Totals, applying_step, total_after
from proxy.engine.planner import ReplayLog, plan_horizons


def drop_step(n: int, keep_last: int = 1, extra: int = 10, *, deep: bool = True) -> StepPlan:
    return StepPlan(
        costs=[0] * n,
        limits=[max(t - keep_last + 1, 0) for t in range(n)],
        extra_cost=extra,
        deep_cuts=deep,
    )


def test_nothing_happens_under_trigger() -> None:
    assert plan_horizons(
        [100] * 5, [drop_step(5)], base=0, reduced_base=0, trigger=1000, target=500
    ) == [0]


def test_a_when_seen_step_acts_under_the_trigger_on_the_units_it_shrinks() -> None:
    full = [100, 900, 100, 100, 800, 100]
    seen = StepPlan(costs=[100, 90, 100, 100, 80, 100], limits=[t + 1 for t in range(6)])
    kwargs = {"base": 0, "reduced_base": 30, "trigger": 10**6, "target": 10**5}
    assert plan_horizons(full, [seen], **kwargs) == [0]  # an ordinary step: nothing happens
    when_seen = StepPlan(seen.costs, seen.limits, when_seen=True)
    assert plan_horizons(full, [when_seen], **kwargs) == [5]  # past the last unit it shrinks
    # each prefix of the history gets the horizon the longer history has there (prefix-stable)
    assert [plan_horizons(full[:n], [when_seen], **kwargs) for n in (1, 2, 4, 5)] == [
        [0],
        [2],
        [2],
        [5],
    ]


def test_reduces_to_target_when_over_trigger() -> None:
    full = [100] * 10  # 1050 tokens: over the trigger at the last unit
    [h] = plan_horizons(full, [drop_step(10)], base=50, reduced_base=60, trigger=1000, target=700)
    assert 60 + 10 + sum(full[h:]) <= 700
    # the smallest cut that gets under the target
    assert 60 + 10 + sum(full[h - 1 :]) > 700


def test_later_growth_stays_between_target_and_trigger() -> None:
    full = [100] * 12
    [h] = plan_horizons(full, [drop_step(12)], base=50, reduced_base=60, trigger=1000, target=700)
    assert 700 < 60 + 10 + sum(full[h:]) <= 1000


def test_horizon_moves_only_when_trigger_is_crossed_again() -> None:
    seen = []
    for n in range(10, 30):
        seen.append(
            plan_horizons(
                [100] * n, [drop_step(n)], base=50, reduced_base=60, trigger=1000, target=700
            )[0]
        )
    changes = sum(1 for a, b in itertools.pairwise(seen) if a != b)
    assert seen == sorted(seen)  # never moves back
    assert changes <= 6  # 20 turns of 100 tokens, 300 tokens of slack: a move every ~4 turns


def test_a_step_that_frees_nothing_does_not_advance() -> None:
    # Costs equal to the full costs (e.g. no tool result in these units): advancing would only
    # switch on the reduced base (the read tools) and make the planned total larger.
    idle = StepPlan(costs=[100] * 3, limits=[1, 2, 3])
    full = [100] * 3
    horizons = plan_horizons(full, [idle], base=10, reduced_base=250, trigger=100, target=50)
    assert horizons == [0]
    assert total_after(full, [idle], horizons, base=10, reduced_base=250) == 310


def test_limit_is_respected_even_when_target_is_missed() -> None:
    n = 5
    step = StepPlan(costs=[0] * n, limits=[0, 0, 1, 1, 2])
    [h] = plan_horizons([1000] * n, [step], base=0, reduced_base=0, trigger=10, target=5)
    assert h == 2


def test_cuts_restrict_horizons() -> None:
    n = 10
    step = StepPlan(costs=[0] * n, limits=[t + 1 for t in range(n)], cuts=[4, 8])
    [h] = plan_horizons([100] * n, [step], base=0, reduced_base=0, trigger=500, target=400)
    assert h in (4, 8)


def test_stronger_step_wins_where_horizons_overlap() -> None:
    n = 6
    offload = StepPlan(costs=[50] * n, limits=[t + 1 for t in range(n)])
    drop = StepPlan(costs=[0] * n, limits=[t + 1 for t in range(n)])
    horizons = plan_horizons(
        [100] * n, [offload, drop], base=0, reduced_base=0, trigger=350, target=300
    )
    # offload first: 6 x 50 = 300 fits, so drop is never advanced
    assert horizons[1] == 0 and horizons[0] > 0


def test_the_step_listed_last_applies_where_horizons_overlap() -> None:
    n = 6
    shrink = StepPlan(costs=[50] * n, limits=[t + 1 for t in range(n)])
    remove = StepPlan(costs=[0] * n, limits=[t + 1 for t in range(n)])
    full = [100] * n
    kwargs = {"base": 0, "reduced_base": 0}
    # the same horizons (shrink covers u0..u5, remove u0..u2): order alone decides
    assert total_after(full, [shrink, remove], [6, 3], **kwargs) == 0 * 3 + 50 * 3
    assert total_after(full, [remove, shrink], [3, 6], **kwargs) == 50 * 6


def test_applying_step_is_the_last_covering_horizon() -> None:
    steps = [StepPlan(costs=[50] * 5, limits=[1] * 5)] * 3
    full = [100] * 5
    assert applying_step([4, 2, 0], 1, steps, full) == 1
    assert applying_step([4, 2, 0], 3, steps, full) == 0
    assert applying_step([4, 2, 0], 4, steps, full) == -1
    assert applying_step([], 0, [], []) == -1


def test_a_later_step_leaving_a_unit_as_it_is_does_not_undo_an_earlier_one() -> None:
    n = 4
    condense = StepPlan(costs=[60, 60, 100, 100], limits=[t + 1 for t in range(n)])
    offload = StepPlan(costs=[100, 100, 100, 20], limits=[t + 1 for t in range(n)])
    full = [100] * n
    steps = [condense, offload]
    assert applying_step([2, 4], 0, steps, full) == 0  # offload leaves u0 as it is
    assert applying_step([2, 4], 3, steps, full) == 1
    assert applying_step([2, 4], 2, steps, full) == 1  # nobody changes u2: the last covering
    kwargs = {"base": 0, "reduced_base": 0}
    assert total_after(full, steps, [2, 4], **kwargs) == 60 + 60 + 100 + 20


def test_at_least_blocks_small_advances() -> None:
    n = 4
    clear = StepPlan(costs=[90] * n, limits=[t + 1 for t in range(n)], at_least=1000)
    [h] = plan_horizons([100] * n, [clear], base=0, reduced_base=0, trigger=350, target=300)
    assert h == 0  # clearing everything frees only 40 tokens


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.integers(0, 400), min_size=1, max_size=40), st.integers(200, 3000))
def test_prefix_replay_is_stable(costs: list[int], trigger: int) -> None:
    """Planning a prefix of the history gives horizons <= those of the whole history."""
    target = trigger * 7 // 10
    n = len(costs)
    whole = plan_horizons(
        costs, [drop_step(n)], base=0, reduced_base=0, trigger=trigger, target=target
    )
    for m in range(1, n):
        part = plan_horizons(
            costs[:m], [drop_step(m)], base=0, reduced_base=0, trigger=trigger, target=target
        )
        assert part[0] <= whole[0]


def test_a_step_with_its_own_target_reduces_deeper_when_it_acts() -> None:
    n = 11  # the trigger is crossed at the last unit
    limits = [t + 1 for t in range(n)]
    shallow = StepPlan(costs=[0] * n, limits=limits)
    deep = StepPlan(costs=[0] * n, limits=limits, target=400)
    kwargs = {"base": 0, "reduced_base": 0, "trigger": 1000, "target": 700}
    [h_shallow] = plan_horizons([100] * n, [shallow], **kwargs)
    [h_deep] = plan_horizons([100] * n, [deep], **kwargs)
    assert sum([100] * n) - 100 * h_shallow <= 700
    assert sum([100] * n) - 100 * h_deep <= 400 < sum([100] * n) - 100 * (h_deep - 1)


def test_total_after_matches_the_plan() -> None:
    n = 10
    step = drop_step(n)
    [h] = plan_horizons([100] * n, [step], base=50, reduced_base=60, trigger=1000, target=700)
    assert total_after([100] * n, [step], [h], base=50, reduced_base=60) == 60 + 10 + 100 * (n - h)
    assert total_after([100] * n, [step], [0], base=50, reduced_base=60) == 50 + 100 * n


def _naive(full: list[int], steps: list[StepPlan], trigger: int, target: int) -> list[int]:
    """The replay without the running total: every time point recomputed from scratch."""
    from proxy.engine.cut_choice import advance
    from proxy.engine.plan_totals import Totals

    totals = Totals(full, steps, 7, 11)
    horizons = [0] * len(steps)
    for t in range(len(full)):
        if totals.total(t, horizons) <= trigger:
            continue
        for k in range(len(steps)):
            if totals.total(t, horizons) <= target:
                break
            horizons[k] = advance(totals, t, horizons, k, target)
    return horizons


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.integers(0, 400), min_size=1, max_size=40),
    st.integers(200, 3000),
    st.integers(0, 3),
)
def test_incremental_replay_equals_naive_replay(costs: list[int], trigger: int, keep: int) -> None:
    n = len(costs)
    steps = [
        StepPlan(costs=[c // 2 for c in costs], limits=[t + 1 for t in range(n)]),
        StepPlan(
            costs=[c // 5 for c in costs],
            limits=[max(t + 1 - keep, 0) for t in range(n)],
            at_least=50,
        ),
        drop_step(n, keep_last=keep + 1),
    ]
    target = trigger * 6 // 10
    got = plan_horizons(costs, steps, base=7, reduced_base=11, trigger=trigger, target=target)
    assert got == _naive(costs, steps, trigger, target)


def _each_unit_a_turn(n: int, turns: int) -> GrowthSizing:
    return GrowthSizing(list(range(n)), turns)


def test_growth_sizing_leaves_room_for_several_turns_of_the_observed_growth() -> None:
    """For a step paced by its own rule (`deep_cuts=False`, a summary), the growth goal is
    the depth."""
    n = 11  # 1,100 tokens: over the trigger at the last unit
    kwargs = {"base": 0, "reduced_base": 0, "trigger": 1000, "target": 900}
    [shallow] = plan_horizons([100] * n, [drop_step(n, extra=0)], **kwargs)
    [deep] = plan_horizons(
        [100] * n, [drop_step(n, extra=0, deep=False)], growth=_each_unit_a_turn(n, 3), **kwargs
    )
    assert 100 * (n - shallow) == 900  # the target: room for one more unit
    assert 100 * (n - deep) == 700  # room for three units of growth under the trigger
    off = plan_horizons(
        [100] * n, [drop_step(n, extra=0)], growth=_each_unit_a_turn(n, 0), **kwargs
    )
    assert off == [shallow]


def test_with_growth_sizing_a_drop_goes_as_deep_as_the_step_allows() -> None:
    """A drop changes the prompt right after the base whatever its depth, so every deeper cut
    re-sends less in all: the next drop is as many turns away as the step allows."""
    n = 11
    kwargs = {"base": 0, "reduced_base": 0, "trigger": 1000, "target": 900}
    [h] = plan_horizons(
        [100] * n, [drop_step(n, keep_last=2, extra=0)], growth=_each_unit_a_turn(n, 3), **kwargs
    )
    assert h == n - 2  # only the protected recent units stay


def test_growth_sizing_never_passes_a_step_limit() -> None:
    n = 11
    step = drop_step(n, keep_last=4, extra=0)
    [h] = plan_horizons(
        [100] * n,
        [step],
        base=0,
        reduced_base=0,
        trigger=1000,
        target=900,
        growth=_each_unit_a_turn(n, 50),
    )
    assert h == n - 4  # as deep as the step may go, not deeper


def _clear_then_drop(drop_limit: list[int]) -> tuple[list[int], list[StepPlan]]:
    """Ten small units, then four large tool results that clearing shrinks to 30."""
    full = [100] * 10 + [300] * 4
    n = len(full)
    clear = StepPlan(costs=[100] * 10 + [30] * 4, limits=[max(t - 1, 0) for t in range(n)])
    drop = StepPlan(costs=[0] * n, limits=drop_limit, extra_cost=10)
    return full, [clear, drop]


def test_a_cut_that_leaves_the_old_prefix_wins_when_deeper_buys_little() -> None:
    # Growth goal 2,100 - 6 x 300 = 300; the drop may only remove units 0-2, so going deeper
    # reaches 1,370 at best and re-sends the whole prompt, while clearing two results reaches
    # 1,660 and keeps the first 1,000 tokens as they were.
    full, steps = _clear_then_drop([min(t + 1, 3) for t in range(14)])
    horizons = plan_horizons(
        full,
        steps,
        base=0,
        reduced_base=0,
        trigger=2100,
        target=1900,
        growth=_each_unit_a_turn(14, 6),
    )
    assert horizons == [12, 0]


def test_the_cut_that_changes_the_prompt_latest_wins_once_it_reaches_the_target() -> None:
    """Clearing the results reaches the target and keeps the first 1,000 tokens; dropping too
    (610 tokens, many turns of room) would re-send all it kept: what clearing shrank stays
    byte-identical through the cuts that follow, so the later change wins. For steps paced by
    their own rule (no deep cuts), the cycle score alone decides and the deeper cut wins."""
    full, steps = _clear_then_drop([max(t - 1, 0) for t in range(14)])
    kwargs = {"base": 0, "reduced_base": 0, "trigger": 2100, "target": 1900}
    growth = _each_unit_a_turn(14, 6)
    assert plan_horizons(full, steps, growth=growth, **kwargs) == [12, 0]
    paced = [dataclasses.replace(s, deep_cuts=False) for s in steps]
    assert plan_horizons(full, paced, growth=growth, **kwargs) == [12, 12]


def test_unchanged_prefix_is_none_when_the_tools_block_changes() -> None:
    full, steps = _clear_then_drop([t + 1 for t in range(14)])
    totals = Totals(full, steps, 5, 50)
    assert unchanged_prefix(totals, 13, [0, 0], [12, 0]) == 0
    # a cut that reduces nothing keeps the whole prompt, whose base is the unreduced one
    assert unchanged_prefix(totals, 13, [0, 0], [0, 0]) == 5 + 1000 + 1200
    assert unchanged_prefix(totals, 13, [11, 0], [12, 0]) == 50 + 1000 + 30
    # a moved drop horizon changes its notice, which stands at the first unit it removed
    assert unchanged_prefix(totals, 13, [12, 4], [12, 6]) == 50


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.integers(0, 400), min_size=1, max_size=40),
    st.integers(200, 3000),
    st.integers(0, 6),
)
def test_prefix_replay_is_stable_with_growth_sizing(
    costs: list[int], trigger: int, turns: int
) -> None:
    """The horizons of a history's prefix are those the whole replay had at that point: the
    growth measure looks only at what has arrived."""
    n = len(costs)
    starts = list(range(0, n, 2))

    def plan(m: int) -> list[int]:
        steps = [
            StepPlan(costs=[c // 3 for c in costs[:m]], limits=[t + 1 for t in range(m)]),
            drop_step(m, keep_last=2),
        ]
        sizing = GrowthSizing([s for s in starts if s < m], turns)
        return plan_horizons(
            costs[:m],
            steps,
            base=5,
            reduced_base=9,
            trigger=trigger,
            target=trigger * 7 // 10,
            growth=sizing,
        )

    seen = [plan(m) for m in range(1, n + 1)]
    for earlier, later in itertools.pairwise(seen):
        assert all(a <= b for a, b in zip(earlier, later, strict=True))


def test_cuts_are_the_time_points_and_horizons_of_each_steps_cuts() -> None:
    kwargs = {"base": 50, "reduced_base": 60, "trigger": 1000, "target": 700}
    idle = StepPlan(costs=[100] * 30, limits=[0] * 30)  # never allowed to move
    previous: list[tuple[int, int]] = []
    for n in range(10, 30):
        cuts: list[list[tuple[int, int]]] = [[], []]
        horizons = plan_horizons([100] * n, [idle, drop_step(n)], cuts=cuts, **kwargs)
        assert cuts[0] == [] and horizons[0] == 0
        assert cuts[1] and cuts[1][-1][1] == horizons[1]
        assert [t for t, _ in cuts[1]] == sorted({t for t, _ in cuts[1]})
        assert [h for _, h in cuts[1]] == sorted({h for _, h in cuts[1]})
        # each cut is what the replay of the units up to its time point gives there
        for t, h in cuts[1]:
            assert plan_horizons([100] * (t + 1), [idle, drop_step(t + 1)], **kwargs)[1] == h
            assert plan_horizons([100] * t, [idle, drop_step(t)], **kwargs)[1] != h
        # the next request (one more unit) reproduces the cuts of the old part
        assert cuts[1][: len(previous)] == previous
        previous = cuts[1]
    nothing: list[list[tuple[int, int]]] = [[]]
    plan_horizons([100] * 5, [drop_step(5)], cuts=nothing, **kwargs)
    assert nothing == [[]]


def test_deferred_one_cut_at_the_last_unit_to_the_target() -> None:
    """A cold cache (`defer`): no cut while the units arrive, then one cut, to the target, at the
    last unit; where the replay cut over and over and ended anywhere between target and trigger."""
    full = [100] * 30
    kwargs = {"base": 50, "reduced_base": 60, "trigger": 1000, "target": 700}
    replayed, deferred = ReplayLog.empty(1), ReplayLog.empty(1)
    [h] = plan_horizons(full, [drop_step(30)], log=replayed, **kwargs)
    [d] = plan_horizons(full, [drop_step(30)], log=deferred, defer=True, **kwargs)
    assert len(replayed.cuts[0]) > 1
    assert deferred.cuts == [[(29, d)]]
    total = 60 + 10 + sum(full[d:])
    assert total <= 700 < total + full[d - 1]  # the smallest cut under the target
    assert d <= h  # keeps at least as much as the replay
    assert deferred.cut_from(29) and not deferred.cut_from(30)


def test_deferred_under_the_trigger_cuts_nothing_but_moves_when_seen() -> None:
    full = [100, 900, 100, 100]
    when_seen = StepPlan([100, 90, 100, 100], [t + 1 for t in range(4)], when_seen=True)
    kwargs = {"base": 0, "reduced_base": 30, "trigger": 10**6, "target": 10**5}
    log = ReplayLog.empty(1)
    assert plan_horizons(full, [when_seen], log=log, defer=True, **kwargs) == [2]
    assert log.cuts == [[]] and log.seen == [[(1, 2)]]
