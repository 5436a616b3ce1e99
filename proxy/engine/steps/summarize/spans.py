"""Which dropped turns the summary covers, and which wait behind a short item until it rolls up.

Every cut of `summarize` removes more turns; rewriting the summary at each one would change its
bytes at each one, and the prompt prefix would break right after the system prompt every time
(a drop's notice breaks there too, but it is smaller). So the summary rolls up only at some
cuts: the turns dropped since its last roll-up stand behind a short item placed after it (their
own archive, and what they change of the summary), until at least `roll_up_turns` turns have
passed since that roll-up and the turns behind the item add up to `roll_up_after` times the
allowance; the cut that meets both rolls them into the summary. Between roll-ups the summary's
bytes do not change and a cut breaks the prefix after it. A roll-up costs the summary's tokens
once, uncached; spacing roll-ups by turns (one request each in an agent loop) and by dropped
tokens makes that cost small against the requests in between at every budget.

The roll-ups are replayed from the step's cuts (`Cut`, each a function of the conversation up to
its time point), so every request of a conversation agrees on them.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.engine.step_api import Cut, PrepareContext


@dataclass(frozen=True)
class SummarySpans:
    summarized: list[int]
    """The units the summary covers."""
    previous: list[int]
    """The units of the summary before it (rolled up into this one; a prefix, may be empty)."""
    tail: list[int]
    """The units dropped since the last roll-up: behind a bare notice."""
    rolled_at: int
    """The time point (a unit index) of the last roll-up; -1 when there was none."""


@dataclass(frozen=True)
class RollUp:
    """When the summary rolls up (both must be met; zeros: at every cut)."""

    tokens: int
    """Tokens of turns dropped since the last roll-up, at least."""
    turns: int
    """Turns passed since the last roll-up, at least."""


def roll_ups(ctx: PrepareContext, cuts: list[Cut], when: RollUp) -> list[Cut]:
    """The cuts at which the summary rolls up: the first one, then each one that meets
    `when` counting from the previous roll-up."""
    rolled: list[Cut] = []
    for t, horizon in cuts:
        if rolled and not _due(ctx, rolled[-1], t, horizon, when):
            continue
        rolled.append((t, horizon))
    return rolled


def _due(ctx: PrepareContext, last: Cut, t: int, horizon: int, when: RollUp) -> bool:
    turns = ctx.unit_turn[t] - ctx.unit_turn[last[0]]
    waiting = sum(ctx.unit_cost(u) for u in range(last[1], horizon) if not ctx.is_protected(u))
    return turns >= when.turns and waiting >= when.tokens


def split(ctx: PrepareContext, dropped: list[int], cuts: list[Cut], when: RollUp) -> SummarySpans:
    """`dropped` split into the summary's span and the tail behind the short item
    (`roll_ups`)."""
    rolled = roll_ups(ctx, cuts, when)
    if not rolled:  # no cut recorded: everything dropped is summarized now
        return SummarySpans(dropped, [], [], -1)
    end = rolled[-1][1]
    start = rolled[-2][1] if len(rolled) > 1 else 0
    summarized = [u for u in dropped if u < end]
    if not summarized:
        return SummarySpans(dropped, [], [], rolled[-1][0])
    previous = [u for u in dropped if u < start]
    return SummarySpans(summarized, previous, [u for u in dropped if u >= end], rolled[-1][0])
