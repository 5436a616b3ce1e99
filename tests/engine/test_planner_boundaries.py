"""The planner at its boundaries: exact trigger and goal, one-unit cuts, arrived units only,
at_least, the reduced base's cost, the cut's score and tie-breaks, unchanged prefixes.

(The general behaviour, determinism and properties: tests/engine/test_planner.py.)"""

from __future__ import annotations

from proxy.engine.cut_choice import advance, choose_cut, unchanged_prefix
from proxy.engine.growth import GrowthSizing
from proxy.engine.plan_totals import StepPlan, Totals
from proxy.engine.planner import plan_horizons


def drop_step(n: int, keep_last: int = 1, extra: int = 10) -> StepPlan:
    return StepPlan(
        costs=[0] * n, limits=[max(t - keep_last + 1, 0) for t in range(n)], extra_cost=extra
    )


def _each_unit_a_turn(n: int, turns: int) -> GrowthSizing:
    return GrowthSizing(list(range(n)), turns)


def test_exactly_at_the_trigger_is_not_over_it() -> None:
    assert plan_horizons(
        [100] * 5, [drop_step(5)], base=0, reduced_base=0, trigger=500, target=300
    ) == [0]
    assert plan_horizons(
        [100] * 5, [drop_step(5)], base=0, reduced_base=0, trigger=499, target=300
    ) == [3]


def test_a_cut_that_only_reaches_the_trigger_is_still_made() -> None:
    # The limit allows dropping one unit: 10 (notice) + 400 lands exactly on the trigger.
    step = StepPlan(costs=[0] * 5, limits=[0, 0, 0, 0, 1], extra_cost=10)
    assert plan_horizons(
        [100] * 5, [step], base=0, reduced_base=0, trigger=410, target=300
    ) == [1]


def test_a_step_that_reaches_the_goal_exactly_leaves_the_next_one_alone() -> None:
    # Clearing two units (50 each) reaches the target of 300 exactly: nothing is dropped.
    clear = StepPlan(costs=[50] * 4, limits=[t + 1 for t in range(4)])
    drop = StepPlan(costs=[0] * 4, limits=[t + 1 for t in range(4)])
    assert plan_horizons(
        [100] * 4, [clear, drop], base=0, reduced_base=0, trigger=390, target=300
    ) == [2, 0]


def test_a_cut_of_one_unit_is_one_unit() -> None:
    step = drop_step(3, keep_last=1, extra=0)
    assert plan_horizons(
        [100] * 3, [step], base=0, reduced_base=0, trigger=250, target=200
    ) == [1]


def test_a_horizon_never_passes_the_units_that_have_arrived_whatever_the_limit() -> None:
    # The step may reduce every unit, but at unit 1 only units 0-1 have arrived: the horizon
    # stops at 2, and unit 2 (small) arrives unreduced and stays so.
    step = StepPlan(costs=[50, 50, 5], limits=[3, 3, 3])
    assert plan_horizons(
        [100, 100, 10], [step], base=0, reduced_base=0, trigger=120, target=50
    ) == [2]


def test_a_when_seen_horizon_that_jumps_over_earlier_units_recounts_them() -> None:
    # Unit 1 (900 -> 90) may be shrunk only once unit 2 has arrived; unit 2 (100 -> 50) moves
    # the horizon over both: the total is 240 then, far under the trigger, so nothing is dropped.
    seen = StepPlan(costs=[100, 90, 50], limits=[0, 1, 3], when_seen=True)
    drop = StepPlan(costs=[0] * 3, limits=[0, 1, 2])
    assert plan_horizons(
        [100, 900, 100], [seen, drop], base=0, reduced_base=0, trigger=1000, target=200
    ) == [3, 0]


def test_a_when_seen_horizon_stops_past_the_unit_that_arrived() -> None:
    # The step may reduce every unit: seeing unit 0 moves its horizon past unit 0 only (unit 1,
    # which it does not shrink, has not arrived); then each shrinking unit in a row moves it on.
    kwargs = {"base": 0, "reduced_base": 0, "trigger": 10**6, "target": 10**5}
    once = StepPlan(costs=[90, 10, 10], limits=[3, 3, 3], when_seen=True)
    assert plan_horizons([900, 10, 10], [once], **kwargs) == [1]
    in_a_row = StepPlan(costs=[90, 90, 90], limits=[1, 2, 3], when_seen=True)
    assert plan_horizons([900, 900, 900], [in_a_row], **kwargs) == [3]


def test_at_least_makes_an_advance_deep_enough_to_free_that_much() -> None:
    def plan(at_least: int, costs: list[int], target: int) -> list[int]:
        clear = StepPlan(costs=costs, limits=[t + 1 for t in range(4)], at_least=at_least)
        return plan_horizons([100] * 4, [clear], base=0, reduced_base=0, trigger=350,
                             target=target)

    # one unit (90 freed) reaches the target; at_least asks for 180: exactly two units
    assert plan(180, [10] * 4, 320) == [2]
    assert plan(150, [10] * 4, 320) == [2]
    assert plan(90, [10] * 4, 320) == [1]  # exactly at_least: enough
    # the target is out of reach: as far as allowed, which frees exactly at_least
    assert plan(90, [10, 100, 100, 100], 100) == [4]


def test_an_advance_must_free_tokens_besides_switching_on_the_reduced_base() -> None:
    # Only unit 0 shrinks (100 -> 90 or 10); the reduced base (the read tools) costs 50 more.
    def advanced(first_cost: int, horizons: list[int]) -> int:
        step = StepPlan(costs=[first_cost, 100, 100, 100], limits=[t + 1 for t in range(4)])
        return advance(Totals([100] * 4, [step], 5, 55), 3, horizons, 0, 100)

    # the first advance frees 10 and pays 50 for the reduced base: it counts as freeing
    assert advanced(90, [0]) == 4
    assert advanced(100, [0]) == 0  # frees nothing at all
    # once reduced, an advance over units that do not shrink frees nothing: no advance
    assert advanced(10, [1]) == 1


def test_the_cut_weighs_the_cycle_length_by_the_prompt_sizes_of_its_turns() -> None:
    # Two goals (500 - 3 x the growth, and the target): clearing alone wins over clearing and
    # dropping a unit, by the score (T - p) / ((T - L)(T + L)); (T - p) / ((T - L) / (T + L))
    # would drop the unit as well.
    full = [200, 300, 100, 100]
    clear = StepPlan(costs=[20, 30, 100, 100], limits=[max(t - 1, 0) for t in range(4)])
    drop = StepPlan(costs=[0] * 4, limits=[max(t - 2, 0) for t in range(4)], extra_cost=10)
    horizons = plan_horizons(full, [clear, drop], base=0, reduced_base=0, trigger=500,
                             target=450, growth=_each_unit_a_turn(4, 3))
    assert horizons == [2, 0]


def test_on_a_tie_the_deeper_goals_cut_is_kept() -> None:
    # Both goals end at 100 tokens with nothing of the old prompt unchanged: the deeper wins.
    step = StepPlan(costs=[0, 0, 100], limits=[1, 2, 3])
    totals = Totals([100, 100, 100], [step], 0, 0)
    assert choose_cut(totals, 2, [0], [0, 100], 110)[0] == [3]


def test_on_a_tie_the_growth_goals_cut_is_kept() -> None:
    # The growth goal (0 here) and the target (140) both end with unit 3 alone (100 tokens) and
    # nothing of the old prompt unchanged: the deeper goal's cut, over unit 3 too, is kept.
    step = StepPlan(costs=[0, 0, 0, 100], limits=[t + 1 for t in range(4)])
    horizons = plan_horizons([100, 200, 100, 100], [step], base=0, reduced_base=0, trigger=470,
                             target=140, growth=_each_unit_a_turn(4, 6))
    assert horizons == [4]


def test_growth_beyond_the_trigger_sets_a_goal_of_nothing_left() -> None:
    # Room for 3 turns of 200 tokens is more than the trigger: the goal is 0 tokens, out of
    # reach, so the step goes as deep as it may (a goal of 1 token would stop after unit 0).
    step = StepPlan(costs=[0, 1], limits=[1, 2])
    horizons = plan_horizons([200, 1], [step], base=0, reduced_base=0, trigger=200, target=0,
                             growth=_each_unit_a_turn(2, 3))
    assert horizons == [2]


def test_a_notice_stands_at_the_first_unit_its_step_removed() -> None:
    # A drop step that keeps the first two units (pinned: their cost under it is the full one):
    # its notice stands at unit 2, so moving its horizon from 3 to 4 keeps units 0-1 unchanged.
    full = [100] * 6
    keeps_two = StepPlan(costs=[100, 100, 0, 0, 0, 0], limits=[t + 1 for t in range(6)],
                         extra_cost=10)
    totals = Totals(full, [keeps_two], 0, 0)
    assert unchanged_prefix(totals, 5, [3], [4]) == 200
    # a horizon below which the step removed nothing yet: its notice stands at the horizon
    keeps_three = StepPlan(costs=[100, 100, 100, 0, 0, 0], limits=[t + 1 for t in range(6)],
                           extra_cost=10)
    totals = Totals(full, [keeps_three], 0, 0)
    assert unchanged_prefix(totals, 5, [2], [4]) == 200


def test_unchanged_prefix_ends_at_the_first_unit_whose_cost_changes() -> None:
    full = [100] * 4
    shrink = StepPlan(costs=[10] * 4, limits=[t + 1 for t in range(4)])
    totals = Totals(full, [shrink], 0, 0)
    assert unchanged_prefix(totals, 3, [3], [4]) == 30  # only the newest unit changes
    assert unchanged_prefix(totals, 2, [3], [3]) == 30  # no change: units 0-2, all of it
    assert unchanged_prefix(totals, 3, [0], [0]) == 400
    # a horizon moving over units the step leaves as they are (pinned) changes nothing
    keeps_two = StepPlan(costs=[100, 100, 10, 10], limits=[t + 1 for t in range(4)])
    totals = Totals(full, [keeps_two], 0, 0)
    assert unchanged_prefix(totals, 3, [1], [2]) == 400


def test_cut_last_cuts_at_the_newest_unit_only() -> None:
    """Mutation run 4: under the trigger, `cut_last` makes the one cut a crossing would make
    now, at the last unit, and no other."""
    cuts: list[list[tuple[int, int]]] = [[]]
    horizons = plan_horizons(
        [100] * 5, [drop_step(5)], base=0, reduced_base=0, trigger=1_000, target=300,
        cuts=cuts, cut_last=True,
    )
    assert horizons == [3] and cuts == [[(4, 3)]]
