"""Which dropped turns the summary covers, and which wait behind a bare notice until it rolls up.

Every cut of `summarize` removes more turns; rewriting the summary at each one would change its
bytes at each one, and the prompt prefix would break right after the system prompt every time
(a drop's notice breaks there too, but it is smaller). So the summary rolls up only at some
cuts: the turns dropped since its last roll-up stand behind a bare drop notice (archived, like
`drop_turns`' notice) placed after the summary, until they add up to `roll_up_after` times the
allowance; the cut that reaches it rolls them into the summary. Between roll-ups the summary's
bytes do not change and a cut breaks the prefix after it.

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


def roll_ups(ctx: PrepareContext, cuts: list[Cut], threshold: int) -> list[Cut]:
    """The cuts at which the summary rolls up: the first one, then each one after which the
    turns dropped since the previous roll-up add up to `threshold` tokens (0: every cut)."""
    rolled: list[Cut] = []
    since = 0
    for t, horizon in cuts:
        waiting = sum(
            ctx.unit_cost(u) for u in range(since, horizon) if not ctx.is_protected(u)
        )
        if not rolled or waiting >= threshold:
            rolled.append((t, horizon))
            since = horizon
    return rolled


def split(
    ctx: PrepareContext, dropped: list[int], cuts: list[Cut], threshold: int
) -> SummarySpans:
    """`dropped` split into the summary's span and the tail behind a notice (`roll_ups`)."""
    rolled = roll_ups(ctx, cuts, threshold)
    if not rolled:  # no cut recorded: everything dropped is summarized now
        return SummarySpans(dropped, [], [], -1)
    end = rolled[-1][1]
    start = rolled[-2][1] if len(rolled) > 1 else 0
    summarized = [u for u in dropped if u < end]
    if not summarized:
        return SummarySpans(dropped, [], [], rolled[-1][0])
    previous = [u for u in dropped if u < start]
    return SummarySpans(summarized, previous, [u for u in dropped if u >= end], rolled[-1][0])


def roll_up_threshold(multiple: float, allowance: int) -> int:
    return int(multiple * allowance)
