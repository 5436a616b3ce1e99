"""Which cut the replay makes when the running total crosses the trigger (`choose_cut`): the
horizons that reduce to each goal, and with deep cuts the deepest and each run of the first steps
taken as deep as they go, weighed by what each leaves of the prompt cached."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from proxy.engine.growth import GrowthMeter
from proxy.engine.plan_totals import StepPlan, Totals


def cut_goals(meter: GrowthMeter | None, trigger: int, target: int) -> list[int]:
    """What a cut reduces to: the target, and deeper when the growth calls for it (first)."""
    goals = [target]
    if meter is not None and trigger - meter.room() < target:
        goals.insert(0, max(trigger - meter.room(), 0))
    return goals



def reduce_to(totals: Totals, t: int, horizons: list[int], goal: int) -> list[int]:
    """Horizons advanced in policy order, each just far enough to bring the total to `goal`."""
    out = horizons.copy()
    for k in range(len(out)):
        if totals.total(t, out) <= goal:
            break
        out[k] = advance(totals, t, out, k, goal)
    return out



def choose_cut(
    totals: Totals,
    t: int,
    horizons: list[int],
    goals: list[int],
    trigger: int,
    *,
    deep: bool = False,
) -> tuple[list[int], int]:
    """The cut that keeps the most of the prompt cached: among the cuts that get to the target,
    the one that changes the prompt latest (the longest unchanged prefix p), then the one with
    the smallest (T - p) / ((T - L)(T + L)).

    While the prompt grows by g tokens a turn from L (after the cut) back to the trigger T, the
    turns send about (T - L)(T + L) / 2g tokens, and all but T - p of them are a prefix of the
    previous prompt. A deeper cut (smaller L) makes that cycle longer; a cut that changes the
    prompt later re-sends less. The latest change comes first because what a late cut shrank
    (say, every old tool result cleared) stays byte-identical through the cuts that follow,
    while a drop down to the recent turns re-sends them all: over a long session the late cuts
    re-send less (`bench.quality.cache_first`). `deep` (growth sizing on) also weighs the
    deepest cut and each run of the first steps taken as deep as they go.

    Never worse: a cut that does not lower the total (the read tools it switches on included)
    is not made: the second value counts the cuts refused so."""
    best, refused = horizons, 0
    best_key: tuple[bool, float, float] | None = None
    before = totals.total(t, horizons)
    for cut in cut_options(totals, t, horizons, goals, deep=deep):
        after = totals.total(t, cut)
        if cut != horizons and after >= before:
            refused += 1
            continue
        if after >= trigger:
            key = (True, 0.0, float("inf"))
        else:
            kept = unchanged_prefix(totals, t, horizons, cut)
            score = (trigger - kept) / ((trigger - after) * (trigger + after))
            key = (after > goals[-1], -float(kept), score) if deep else (False, 0.0, score)
        if best_key is None or key < best_key:
            best, best_key = cut, key
    return best, refused



def cut_options(
    totals: Totals, t: int, horizons: list[int], goals: list[int], *, deep: bool
) -> list[list[int]]:
    """The cuts weighed: reducing to each goal (steps advanced in policy order, each just far
    enough); with `deep`, also as far as every step goes, and each run of the first steps taken
    as deep as they go (e.g. every old result cleared, no turn dropped)."""
    options = [reduce_to(totals, t, horizons, goal) for goal in goals]
    if not deep:
        return options
    options.append(reduce_to(totals, t, horizons, 0))
    for k in range(len(horizons) - 1):
        run = horizons.copy()
        for j in range(k + 1):
            run[j] = advance(totals, t, run, j, 0)
        if run not in options:
            options.append(run)
    return options



def unchanged_prefix(totals: Totals, t: int, old: list[int], new: list[int]) -> int:
    """Tokens at the start of the prompt under `old` (units 0..t) that `new` leaves as they are:
    none when the reduced base is switched on (it changes the tools block, which comes first);
    a step's extra item (a notice naming what it removed) changes with its horizon and stands at
    the first unit the step reduces."""
    if not any(old) and any(new) and totals.reduced_base != totals.base:
        return 0
    first = t + 1
    for k, step in enumerate(totals.steps):
        if new[k] == old[k]:
            continue
        if step.extra_cost and old[k]:
            first = min(first, first_reduced(totals, step, old[k]))
        first = min(
            first,
            next(
                (
                    u
                    for u in range(old[k], min(new[k], t + 1))
                    if totals.unit_cost(u, old) != totals.unit_cost(u, new)
                ),
                first,
            ),
        )
    base = totals.reduced_base if any(old) else totals.base
    return base + totals.units_cost(first, old)



def first_reduced(totals: Totals, step: StepPlan, horizon: int) -> int:
    return next((u for u in range(horizon) if step.costs[u] != totals.full[u]), horizon)



def candidates(step: StepPlan, low: int, high: int) -> list[int]:
    if step.cuts is None:
        return list(range(low + 1, high + 1))
    return step.cuts[bisect_right(step.cuts, low) : bisect_right(step.cuts, high)]



def advance(totals: Totals, t: int, horizons: list[int], k: int, target: int) -> int:
    step = totals.steps[k]
    current = horizons[k]
    if step.target is not None:
        target = min(target, step.target)
    options = candidates(step, current, min(step.limits[t], t + 1))
    if not options:
        return current

    def total_at(h: int) -> int:
        trial = horizons.copy()
        trial[k] = h
        return totals.total(t, trial)

    before = totals.total(t, horizons)
    # total_at is non-increasing in h: the smallest option under the target, else the largest.
    pick = bisect_left(options, True, key=lambda h: total_at(h) <= target)
    chosen = options[min(pick, len(options) - 1)]
    if step.at_least and before - total_at(chosen) < step.at_least:
        pick = bisect_left(options, True, key=lambda h: before - total_at(h) >= step.at_least)
        if pick == len(options):
            return current
        chosen = options[pick]
    # Advance only if it frees tokens. The first advance also switches on the reduced base (the
    # read tools): that cost comes with any reduction, so it does not count against this one.
    switch = 0 if any(horizons) else totals.reduced_base - totals.base
    return chosen if total_at(chosen) - switch < before else current
