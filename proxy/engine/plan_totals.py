"""What a conversation costs under the steps' horizons: each step's plan (`StepPlan`), the
running totals of a replay (`Totals`), and which step applies to a unit (`applying_step`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise


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
    """The planner may weigh taking this step deeper than the goal (`cut_choice.cut_options`);
    a step whose cuts are paced by their own rule (a summary's roll-ups) says no, and the plan
    keeps to the goals."""
    when_seen: bool = False
    """The step acts on each unit as it arrives, trigger or not, whenever that unit costs less
    under it (e.g. offloading every oversized result): its horizon then moves past that unit."""



@dataclass
class Totals:
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



def total_after(
    full: list[int], steps: list[StepPlan], horizons: list[int], *, base: int, reduced_base: int
) -> int:
    """The planned tokens of the whole conversation under `horizons`."""
    if not full:
        return base
    return Totals(full, steps, base, reduced_base).total(len(full) - 1, horizons)
