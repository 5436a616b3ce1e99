"""summary_spans: which dropped turns the summary covers and which wait behind the tail item,
replayed from the step's cuts."""

from __future__ import annotations

from typing import Any

from context_harness import assistant, make_ctx, policy, system, user

from proxy.engine.step_api import PrepareContext
from proxy.engine.steps.summarize.spans import RollUp, SummarySpans, roll_ups, split


def history() -> list[dict[str, Any]]:
    """Units u0 (the task, protected) .. u8; turns start at units 1, 3, 5, 7."""
    return [
        system(),
        user("Task: ship the release."),  # u0
        user("The release is REL-4711, owner Dana."),  # u1 turn 1
        assistant("Noted, release REL-4711."),  # u2
        user("Correction: the release is REL-4712 now."),  # u3 turn 2
        assistant("Noted."),  # u4
        user("Go on."),  # u5 turn 3
        assistant("Working."),  # u6
        user("Which release?"),  # u7 turn 4
        assistant("Checking."),  # u8
    ]


def ctx() -> PrepareContext:
    return make_ctx(history(), policy(), allowance=10_000)


def cost(c: PrepareContext, units: range) -> int:
    return sum(c.unit_cost(u) for u in units)


EVERY = RollUp(0, 0)


def test_with_no_condition_every_cut_rolls_up() -> None:
    cuts = [(4, 3), (6, 5), (8, 7)]
    assert roll_ups(ctx(), cuts, EVERY) == cuts


def test_the_first_cut_rolls_up_then_one_that_drops_enough_tokens_since() -> None:
    c = ctx()
    cuts = [(4, 3), (6, 5), (8, 7)]
    waiting = cost(c, range(3, 5))  # what the second cut drops beyond the first roll-up
    assert roll_ups(c, cuts, RollUp(cost(c, range(3, 7)) + 1, 0)) == [(4, 3)]
    assert roll_ups(c, cuts, RollUp(waiting + 1, 0)) == [(4, 3), (8, 7)]
    assert roll_ups(c, cuts, RollUp(waiting, 0)) == [(4, 3), (6, 5)]
    # after a roll-up the count starts again from its horizon
    assert roll_ups(c, cuts, RollUp(cost(c, range(5, 7)), 0)) == cuts


def test_a_roll_up_also_waits_for_enough_turns_since_the_last_one() -> None:
    c = ctx()
    cuts = [(4, 3), (6, 5), (8, 7)]  # at turns 2, 3 and 4
    assert roll_ups(c, cuts, RollUp(0, 1)) == cuts
    assert roll_ups(c, cuts, RollUp(0, 2)) == [(4, 3), (8, 7)]
    assert roll_ups(c, cuts, RollUp(0, 3)) == [(4, 3)]
    # both must be met: enough turns but too few tokens, or the reverse, is no roll-up
    assert roll_ups(c, cuts, RollUp(cost(c, range(3, 7)) + 1, 2)) == [(4, 3)]
    assert roll_ups(c, cuts, RollUp(cost(c, range(3, 5)), 3)) == [(4, 3)]
    assert roll_ups(c, cuts, RollUp(cost(c, range(3, 7)), 2)) == [(4, 3), (8, 7)]


def test_protected_units_do_not_count_toward_a_roll_up() -> None:
    c = ctx()
    # u0 is protected: the first cut drops nothing of it, the second drops u1 and u2
    assert roll_ups(c, [(0, 1), (4, 3)], RollUp(cost(c, range(1, 3)), 0)) == [(0, 1), (4, 3)]
    assert roll_ups(c, [(0, 1), (4, 3)], RollUp(cost(c, range(0, 3)), 0)) == [(0, 1)]
    # a pinned unit among those dropped since the roll-up does not count either
    pinned = make_ctx(history(), policy(protect={"pinned": [{"contains": "REL-4712"}]}), 10_000)
    assert pinned.is_protected(3)
    since = [(4, 3), (8, 7)]
    assert roll_ups(pinned, since, RollUp(cost(pinned, range(4, 7)), 0)) == since
    assert roll_ups(pinned, since, RollUp(cost(pinned, range(3, 7)), 0)) == [(4, 3)]


def test_turns_since_a_roll_up_count_from_its_time_point_not_its_horizon() -> None:
    c = ctx()
    cuts = [(6, 3), (8, 5)]  # at turns 3 and 4; the first cut's horizon is in turn 2
    assert roll_ups(c, cuts, RollUp(0, 1)) == cuts
    assert roll_ups(c, cuts, RollUp(0, 2)) == [(6, 3)]


def test_split_into_the_summary_the_previous_one_and_the_tail() -> None:
    c = ctx()
    dropped = [1, 2, 3, 4, 5, 6]
    cuts = [(4, 3), (6, 5), (8, 7)]
    never = RollUp(cost(c, range(0, 9)), 0)
    assert split(c, dropped, cuts, never) == SummarySpans([1, 2], [], [3, 4, 5, 6], 4)
    assert split(c, dropped, cuts, EVERY) == SummarySpans(dropped, [1, 2, 3, 4], [], 8)
    assert split(c, dropped, cuts, RollUp(cost(c, range(3, 5)), 0)) == SummarySpans(
        [1, 2, 3, 4], [1, 2], [5, 6], 6
    )


def test_without_cuts_or_a_summary_span_everything_is_summarized() -> None:
    c = ctx()
    assert split(c, [1, 2], [], RollUp(10, 0)) == SummarySpans([1, 2], [], [], -1)
    # the first roll-up dropped only protected units: nothing to summarize before the tail
    assert split(c, [1, 2], [(0, 1), (4, 3)], RollUp(10**6, 0)) == SummarySpans(
        [1, 2], [], [], 0
    )


def test_with_one_roll_up_the_summary_rolls_up_nothing_before_it() -> None:
    """Unit 0 is an assistant greeting (a leading turn, not protected): still no previous
    summary when the first roll-up is the only one."""
    c = make_ctx([system(), assistant("Hello."), *history()[1:]], policy(), allowance=10_000)
    assert not c.is_protected(0)
    never = RollUp(10**6, 0)
    assert split(c, [0, 1, 2, 3, 4], [(4, 3), (6, 5)], never) == SummarySpans(
        [0, 1, 2], [], [3, 4], 4
    )
