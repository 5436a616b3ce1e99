"""How fast a conversation grows, measured while the planner replays it.

A cut that frees about one turn breaks the prompt prefix (and the provider's prompt cache) every
turn or two when turns are large. The planner therefore sizes a cut by the conversation's own
growth: the median of what its recent turns added, as observed by the replay. The meter sees the
units in arrival order and only what has arrived, so the growth used at unit t is a function of
units 0..t: the next request (the same history plus new messages) replays the same decisions for
the old part, which keeps preparation deterministic and the old prefix byte-identical.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from statistics import median_low

RECENT_TURNS = 5
"""How many completed turns the median is taken over."""


@dataclass(frozen=True)
class GrowthSizing:
    """Sizes the planner's cuts by the conversation's growth."""

    starts: list[int]
    """Unit index where each measured step of growth starts, sorted (`growth_starts`)."""
    turns: int
    """A cut makes room for this many turns of the observed growth (0: off)."""
    recent: int = RECENT_TURNS


def growth_starts(exchanges: list[bool], turn_starts: list[int]) -> list[int]:
    """Where a step of growth starts: at each turn, and at each tool exchange after the first of
    its turn (an agent working inside one turn grows by an exchange per request, and a whole
    turn would then be the whole conversation). `exchanges[u]`: unit u is a tool exchange."""
    firsts = set(turn_starts)
    starts: list[int] = []
    seen_exchange = False
    for unit, exchange in enumerate(exchanges):
        if unit in firsts:
            starts.append(unit)
            seen_exchange = exchange
        elif exchange:
            if seen_exchange:
                starts.append(unit)
            seen_exchange = True
    return starts


@dataclass
class GrowthMeter:
    """Tokens each turn added as the units arrived (after the reductions in force then)."""

    sizing: GrowthSizing
    _completed: list[int] = field(default_factory=list)
    _current: int = 0
    _turn: int = -1

    def arrive(self, unit: int, tokens: int) -> None:
        """Unit `unit` arrived and added `tokens` to the prompt."""
        turn = bisect_right(self.sizing.starts, unit) - 1
        if turn != self._turn:
            if self._turn >= 0:
                self._completed.append(self._current)
            self._turn, self._current = turn, 0
        self._current += tokens

    def per_turn(self) -> int:
        """The median growth of the recent completed turns; the current turn so far when none
        is complete yet."""
        recent = self._completed[-self.sizing.recent :]
        return median_low(recent) if recent else self._current

    def room(self) -> int:
        """The tokens a cut should leave free below the trigger."""
        return self.sizing.turns * self.per_turn()
