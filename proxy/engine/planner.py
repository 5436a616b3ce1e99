"""Where each reduction step cuts: a deterministic replay of the conversation's growth.

Every step has a *horizon*: the units before it are reduced by that step. Precedence is the
policy's order: where several horizons cover a unit, the step listed last of those that change
it applies (policies list the gentler reductions first, so a later step is the stronger one; a
step whose horizon passed a unit it leaves as it is does not undo an earlier step's rewrite of
it). The planner replays the
conversation one unit at a time, as if each unit had just arrived; whenever the running total
exceeds the trigger, it advances horizons in policy order, each just far enough to get under the
target, or deeper when large turns call for it (`growth.GrowthSizing`: room for a few turns of the
growth observed so far), choosing between the two by what each leaves cached (`_cut`). Horizons
never move back.

Why replay: the proxy is stateless, yet the next request (the same history plus new messages)
must reproduce the same horizons for the old part, so that the prepared prompt keeps the previous
prepared prompt as its byte prefix. Replaying from the start gives exactly that: the state after
the old units is a function of the old units only, and it changes only when a new unit pushes the
total over the trigger again (hysteresis between trigger and target).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate, pairwise

from proxy.engine.growth import GrowthMeter, GrowthSizing


@dataclass(frozen=True)
class StepPlan:
    costs: list[int]
    """Per unit: its tokens when this step is the strongest one applied to it."""
    limits: list[int]
    """Per time point t (unit index): the farthest horizon allowed once unit t has arrived."""
    cuts: list[int] | None = None
    """Allowed horizons, sorted; None allows every unit boundary."""
    at_least: int = 0
    """An advance must free at least this many tokens, or it does not happen."""
    extra_cost: int = 0
    """Tokens added once this horizon is above zero (e.g. the notice replacing dropped turns)."""
    target: int | None = None
    """When this step has to act, it reduces to this (below the budget's target) if set."""
    keeps_from: int | None = None
    """For a step that removes whole units: the first unit of the recent ones it never removes.
    None: the step removes no unit (it may shrink them)."""
    deep_cuts: bool = True
    """The planner may weigh taking this step deeper than the goal (`_cut_options`); a step
    whose cuts are paced by their own rule (a summary's roll-ups) says no, and the plan keeps
    to the goals."""
    when_seen: bool = False
    """The step acts on each unit as it arrives, trigger or not, whenever that unit costs less
    under it (e.g. offloading every oversized result): its horizon then moves past that unit."""


Move = tuple[int, int]
"""(the time point, a unit index, at which a horizon moved; the horizon it moved to)."""


@dataclass
class Pinned:
    """The moves an earlier request of the conversation made over its units, replayed as they
    were (whatever the budget is now)."""

    units: int
    """The time points covered: units 0..units-1."""
    cuts: list[list[Move]]
    """Per step (policy order): its cuts."""
    seen: list[list[Move]]
    """Per step: its `when_seen` moves."""
    slack: int = 0
    """How much the plan over-counted that request (its stand-in items are sized for the
    widest numbers): while no new cut is made, the trigger is checked against the tokens the
    request really had, not the planned ones."""
    _seen_at: dict[int, list[tuple[int, int]]] = field(init=False, repr=False)
    _cuts_at: dict[int, list[tuple[int, int]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._seen_at, self._cuts_at = _by_time(self.seen), _by_time(self.cuts)

    def seen_at(self, t: int) -> list[tuple[int, int]]:
        """The `when_seen` moves at time point t, as (step, horizon)."""
        return self._seen_at.get(t, [])

    def cuts_at(self, t: int) -> list[tuple[int, int]]:
        """The cuts at time point t, as (step, horizon)."""
        return self._cuts_at.get(t, [])


def _by_time(moves: list[list[Move]]) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for k, step_moves in enumerate(moves):
        for t, h in step_moves:
            out.setdefault(t, []).append((k, h))
    return out


@dataclass
class ReplayLog:
    """What a replay did, besides the final horizons."""

    cuts: list[list[Move]]
    """Per step: its cuts (as `plan_horizons(cuts=)`)."""
    seen: list[list[Move]]
    """Per step: its `when_seen` moves."""
    refused: int = 0
    """Moves not made because they would not have lowered the running total."""
    slack: int = 0
    """The remembered slack (`Pinned.slack`) still in force at the end: no cut was made after
    the remembered units, so the request has that many tokens fewer than planned."""

    @classmethod
    def empty(cls, steps: int) -> ReplayLog:
        return cls([[] for _ in range(steps)], [[] for _ in range(steps)])

    def seen_moved(self, t: int, horizons: list[int], moved: list[int]) -> None:
        for k in moved:
            self.seen[k].append((t, horizons[k]))

    def cut_from(self, t0: int) -> bool:
        """Whether a cut was made at time point `t0` or later."""
        return any(t >= t0 for step in self.cuts for t, _ in step)

    def cut(self, t: int, old: list[int], new: list[int]) -> None:
        for k, (a, b) in enumerate(zip(new, old, strict=True)):
            if a != b:
                self.cuts[k].append((t, a))


_NO_PIN = Pinned(0, [], [])


@dataclass
class _Totals:
    full: list[int]
    steps: list[StepPlan]
    base: int
    reduced_base: int

    def __post_init__(self) -> None:
        self.full_prefix = [0, *accumulate(self.full)]
        self._prefixes: dict[tuple[int, ...], list[int]] = {(): self.full_prefix}

    def total(self, t: int, horizons: list[int]) -> int:
        end = t + 1
        reduced = any(h > 0 for h in horizons)
        out = self.reduced_base if reduced else self.base
        out += sum(s.extra_cost for s, h in zip(self.steps, horizons, strict=True) if h > 0)
        bounds = sorted({0, end, *(min(h, end) for h in horizons)})
        for a, b in pairwise(bounds):
            out += self._segment(a, b, horizons)
        return out

    def units_cost(self, end: int, horizons: list[int]) -> int:
        """Tokens of units 0..end-1 under `horizons` (without the base and extra items)."""
        bounds = sorted({0, end, *(min(h, end) for h in horizons)})
        return sum(self._segment(a, b, horizons) for a, b in pairwise(bounds))

    def unit_cost(self, u: int, horizons: list[int]) -> int:
        """Unit u's tokens under the step that applies to it (`applying_step`)."""
        best = applying_step(horizons, u, self.steps, self.full)
        return self.full[u] if best < 0 else self.steps[best].costs[u]

    def _segment(self, a: int, b: int, horizons: list[int]) -> int:
        # Every horizon is a prefix: the steps covering unit b-1 cover the whole segment.
        covering = tuple(k for k, h in enumerate(horizons) if h >= b)
        prefix = self._prefixes.get(covering)
        if prefix is None:
            costs = [self._cost_under(covering, u) for u in range(len(self.full))]
            prefix = self._prefixes[covering] = [0, *accumulate(costs)]
        return prefix[b] - prefix[a]

    def _cost_under(self, covering: tuple[int, ...], u: int) -> int:
        full = self.full[u]
        return next((c for k in reversed(covering) if (c := self.steps[k].costs[u]) != full), full)


def applying_step(
    horizons: list[int], u: int, steps: Sequence[StepPlan], full: Sequence[int]
) -> int:
    """The index of the step that reduces unit u, or -1: the last one (in policy order) whose
    horizon covers it and that changes it, else the last one covering it. A step whose horizon
    passed a unit it leaves as it is (e.g. offloading, past a result under its threshold) does
    not undo what an earlier step made of that unit (e.g. condensing)."""
    covering = [k for k in range(len(horizons) - 1, -1, -1) if horizons[k] > u]
    changing = (k for k in covering if steps[k].costs[u] != full[u])
    return next(changing, covering[0] if covering else -1)


def plan_horizons(
    full: list[int],
    steps: list[StepPlan],
    *,
    base: int,
    reduced_base: int,
    trigger: int,
    target: int,
    growth: GrowthSizing | None = None,
    cuts: list[list[tuple[int, int]]] | None = None,
    cut_last: bool = False,
    pinned: Pinned | None = None,
    log: ReplayLog | None = None,
    defer: bool = False,
) -> list[int]:
    """Horizons per step (policy order) after replaying every unit of the conversation.

    With `growth`, a cut goes below the target when that is needed to leave room for
    `growth.turns` steps of the growth observed so far under the trigger. `cuts`, when
    given (one empty list per step), receives each step's cuts in order: (the time point, a
    unit index, at which its horizon was advanced, the horizon it moved to); a `when_seen` move
    is not a cut. Like the horizons, each is a function of the units up to its time point.
    `cut_last`: the last unit acts as if it crossed the trigger (the cut the next request
    would make if it crossed it: what a background summary may be made for ahead of time).
    `pinned`: the units it covers move as it says, nothing is decided there again. `log`
    receives the cuts, the `when_seen` moves and the cuts refused (never worse). `defer`: one
    cut, at the last unit (when over the trigger), and only the `when_seen` moves before it (a
    cold cache: no prefix to keep, and one cut to the goal keeps the most of the conversation)."""
    totals = _Totals(full, steps, base, reduced_base)
    horizons = [0] * len(steps)
    log = log if log is not None else ReplayLog.empty(len(steps))
    meter = GrowthMeter(growth) if growth is not None and growth.turns else None
    deep = meter is not None and all(s.deep_cuts for s in steps)
    pin = pinned if pinned is not None and pinned.units <= len(full) else _NO_PIN
    slack = pin.slack
    running = base  # the total up to the previous unit: horizons only change on an advance
    last = len(full) - 1
    for t in range(len(full)):
        held = t < pin.units
        if held:
            moved = _set(steps, horizons, pin.seen_at(t), t)
        else:
            moved = _act_when_seen(totals, t, horizons, log)
        log.seen_moved(t, horizons, moved)
        arrived = totals.unit_cost(t, horizons)
        running = totals.total(t, horizons) if moved else running + arrived
        if meter is not None:
            meter.arrive(t, arrived)
        if held:
            cut = horizons.copy()
            _set(steps, cut, pin.cuts_at(t), t)
        elif (defer and t < last) or (running - slack <= trigger and not (cut_last and t == last)):
            continue
        else:
            goals = _goals(meter, trigger, target)
            cut = _cut(totals, t, horizons, goals, trigger, log, deep=deep)
            slack = slack if cut == horizons else 0  # a new stand-in item: the plan's count
        if cut != horizons:
            log.cut(t, horizons, cut)
            horizons = cut
            running = totals.total(t, horizons)
    log.slack = slack
    if cuts is not None:
        for k, step_cuts in enumerate(log.cuts):
            cuts[k].extend(step_cuts)
    return horizons


def _goals(meter: GrowthMeter | None, trigger: int, target: int) -> list[int]:
    """What a cut reduces to: the target, and deeper when the growth calls for it (first)."""
    goals = [target]
    if meter is not None and trigger - meter.room() < target:
        goals.insert(0, max(trigger - meter.room(), 0))
    return goals


def _set(
    steps: list[StepPlan], horizons: list[int], moves: list[tuple[int, int]], t: int
) -> list[int]:
    """Apply remembered (step, horizon) moves at time point t (never past what the step allows
    there, e.g. after a last resort that relaxed it; never back); the steps that moved."""
    moved = []
    for k, h in moves:
        if not 0 <= k < len(horizons):
            continue
        h = min(h, steps[k].limits[t], t + 1)
        if h > horizons[k]:
            horizons[k] = h
            moved.append(k)
    return moved


def _reduce_to(totals: _Totals, t: int, horizons: list[int], goal: int) -> list[int]:
    """Horizons advanced in policy order, each just far enough to bring the total to `goal`."""
    out = horizons.copy()
    for k in range(len(out)):
        if totals.total(t, out) <= goal:
            break
        out[k] = _advance(totals, t, out, k, goal)
    return out


def _cut(
    totals: _Totals,
    t: int,
    horizons: list[int],
    goals: list[int],
    trigger: int,
    log: ReplayLog | None = None,
    *,
    deep: bool = False,
) -> list[int]:
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
    is not made."""
    best = horizons
    best_key: tuple[bool, float, float] | None = None
    before = totals.total(t, horizons)
    for cut in _cut_options(totals, t, horizons, goals, deep=deep):
        after = totals.total(t, cut)
        if cut != horizons and after >= before:
            if log is not None:
                log.refused += 1
            continue
        if after >= trigger:
            key = (True, 0.0, float("inf"))
        else:
            kept = unchanged_prefix(totals, t, horizons, cut)
            score = (trigger - kept) / ((trigger - after) * (trigger + after))
            key = (after > goals[-1], -float(kept), score) if deep else (False, 0.0, score)
        if best_key is None or key < best_key:
            best, best_key = cut, key
    return best


def _cut_options(
    totals: _Totals, t: int, horizons: list[int], goals: list[int], *, deep: bool
) -> list[list[int]]:
    """The cuts weighed: reducing to each goal (steps advanced in policy order, each just far
    enough); with `deep`, also as far as every step goes, and each run of the first steps taken
    as deep as they go (e.g. every old result cleared, no turn dropped)."""
    options = [_reduce_to(totals, t, horizons, goal) for goal in goals]
    if not deep:
        return options
    options.append(_reduce_to(totals, t, horizons, 0))
    for k in range(len(horizons) - 1):
        run = horizons.copy()
        for j in range(k + 1):
            run[j] = _advance(totals, t, run, j, 0)
        if run not in options:
            options.append(run)
    return options


def unchanged_prefix(totals: _Totals, t: int, old: list[int], new: list[int]) -> int:
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
            first = min(first, _first_reduced(totals, step, old[k]))
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


def _first_reduced(totals: _Totals, step: StepPlan, horizon: int) -> int:
    return next((u for u in range(horizon) if step.costs[u] != totals.full[u]), horizon)


def _act_when_seen(
    totals: _Totals, t: int, horizons: list[int], log: ReplayLog | None = None
) -> list[int]:
    """Move the horizon of every `when_seen` step that shrinks unit t past it, if that lowers
    the total (the first move switches on the read tools: a small result whose preview saves
    less than they cost stays as it is); the steps that moved. Like every decision here, a
    function of the units up to t."""
    trial = horizons.copy()
    for k, step in enumerate(totals.steps):
        if step.when_seen and step.costs[t] < totals.full[t] and trial[k] <= t:
            trial[k] = max(trial[k], min(step.limits[t], t + 1))
    moved = [k for k, (new, old) in enumerate(zip(trial, horizons, strict=True)) if new > old]
    if not moved:
        return []
    if totals.total(t, trial) >= totals.total(t, horizons):
        if log is not None:
            log.refused += 1
        return []
    horizons[:] = trial
    return moved


def _candidates(step: StepPlan, low: int, high: int) -> list[int]:
    if step.cuts is None:
        return list(range(low + 1, high + 1))
    return step.cuts[bisect_right(step.cuts, low) : bisect_right(step.cuts, high)]


def total_after(
    full: list[int], steps: list[StepPlan], horizons: list[int], *, base: int, reduced_base: int
) -> int:
    """The planned tokens of the whole conversation under `horizons`."""
    if not full:
        return base
    return _Totals(full, steps, base, reduced_base).total(len(full) - 1, horizons)


def _advance(totals: _Totals, t: int, horizons: list[int], k: int, target: int) -> int:
    step = totals.steps[k]
    current = horizons[k]
    if step.target is not None:
        target = min(target, step.target)
    options = _candidates(step, current, min(step.limits[t], t + 1))
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
