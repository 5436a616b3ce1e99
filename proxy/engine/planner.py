"""Where each reduction step cuts: a deterministic replay of the conversation's growth.

Every step has a *horizon*: the units before it are reduced by that step. Precedence is the
policy's order: where several horizons cover a unit, the step listed last of those that change
it applies (policies list the gentler reductions first, so a later step is the stronger one; a
step whose horizon passed a unit it leaves as it is does not undo an earlier step's rewrite of
it). The planner replays the
conversation one unit at a time, as if each unit had just arrived; whenever the running total
exceeds the trigger, it advances horizons in policy order, each just far enough to get under the
target, or deeper when large turns call for it (`growth.GrowthSizing`: room for a few turns of the
growth observed so far), choosing between the two by what each leaves cached
(`cut_choice.choose_cut`). Horizons never move back.

Why replay: the proxy is stateless, yet the next request (the same history plus new messages)
must reproduce the same horizons for the old part, so that the prepared prompt keeps the previous
prepared prompt as its byte prefix. Replaying from the start gives exactly that: the state after
the old units is a function of the old units only, and it changes only when a new unit pushes the
total over the trigger again (hysteresis between trigger and target).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.engine.cut_choice import choose_cut, cut_goals
from proxy.engine.growth import GrowthMeter, GrowthSizing
from proxy.engine.plan_totals import StepPlan, Totals

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
    totals = Totals(full, steps, base, reduced_base)
    horizons = [0] * len(steps)
    log = log if log is not None else ReplayLog.empty(len(steps))
    meter = GrowthMeter(growth) if growth is not None and growth.turns else None
    deep = meter is not None and all(s.deep_cuts for s in steps)
    pin = pinned if pinned is not None and pinned.units <= len(full) else _NO_PIN
    slack, running = pin.slack, base  # running: the total before unit t
    last = len(full) - 1
    for t in range(len(full)):
        held = t < pin.units
        moved = _seen(totals, t, horizons, pin if held else None, log)
        arrived = totals.unit_cost(t, horizons)
        running = totals.total(t, horizons) if moved else running + arrived
        if meter is not None:
            meter.arrive(t, arrived)
        if held:
            cut = _pinned_cut(steps, horizons, pin, t)
        elif (defer and t < last) or (running - slack <= trigger and not (cut_last and t == last)):
            continue
        else:
            goals = cut_goals(meter, trigger, target)
            cut, refused = choose_cut(totals, t, horizons, goals, trigger, deep=deep)
            log.refused += refused
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


def _pinned_cut(steps: list[StepPlan], horizons: list[int], pin: Pinned, t: int) -> list[int]:
    """The cut `pin` remembers at time point t (the horizons as they are when it made none)."""
    cut = horizons.copy()
    _set(steps, cut, pin.cuts_at(t), t)
    return cut


def _seen(
    totals: Totals, t: int, horizons: list[int], pin: Pinned | None, log: ReplayLog
) -> list[int]:
    """Unit t arrived: the `when_seen` moves there (as `pin` remembers them, or decided now);
    the steps that moved."""
    if pin is not None:
        moved = _set(totals.steps, horizons, pin.seen_at(t), t)
    else:
        moved = _act_when_seen(totals, t, horizons, log)
    log.seen_moved(t, horizons, moved)
    return moved



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



def _act_when_seen(
    totals: Totals, t: int, horizons: list[int], log: ReplayLog | None = None
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

