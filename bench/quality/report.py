"""Aggregating judged requests into the results tables, the goal check and RESULTS.md."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.quality.judge import Outcome

HEADING = "## Policy quality"
DEFAULT_METHOD = "ctxproxy default"
REFERENCE_METHOD = "fill-and-restart (reference)"
REDUCTION_SCENARIOS = ("B", "C", "D")
GROWING = "E"


@dataclass(frozen=True)
class Record:
    scenario: str
    seed: int
    method: str
    budget: int
    outcome: Outcome


@dataclass(frozen=True)
class Row:
    requests: int
    refused: int
    over: int
    broken: int
    probes: int
    reachable: int
    inline: int
    stale: int
    before: int
    after: int
    prefix: int
    prompt: int

    @property
    def saved(self) -> float | None:
        return 1 - self.after / self.before if self.before else None

    @property
    def prefix_share(self) -> float | None:
        return self.prefix / self.prompt if self.prompt else None

    @property
    def reach_share(self) -> float | None:
        return self.reachable / self.probes if self.probes else None


def aggregate(records: Iterable[Record]) -> Row:
    rs = list(records)
    outs = [r.outcome for r in rs]
    forwarded = [r for r in rs if not r.outcome.refused]
    return Row(
        requests=len(outs),
        refused=sum(o.refused for o in outs),
        over=sum(o.over for o in outs),
        broken=sum(o.broken_pairs > 0 for o in outs),
        probes=sum(len(o.reach) for o in outs),
        reachable=sum(x != "missing" for o in outs for x in o.reach),
        inline=sum(x == "inline" for o in outs for x in o.reach),
        stale=sum(o.stale for o in outs),
        before=sum(r.outcome.tokens_before for r in forwarded),
        after=sum(r.outcome.tokens_after or 0 for r in forwarded),
        prefix=sum(o.prefix_tokens for o in outs),
        prompt=sum(o.prompt_tokens for o in outs),
    )


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole}" if whole else "—"


def main_table(records: list[Record], methods: list[str], budgets: list[int]) -> str:
    lines = [
        "| budget | method | requests | refused | over budget | broken pairs | evidence "
        "reachable | inline | stale only | saved B-D | cached prefix E |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for budget in budgets:
        for method in methods:
            rs = [r for r in records if r.budget == budget and r.method == method]
            row = aggregate(rs)
            bd = aggregate(r for r in rs if r.scenario in REDUCTION_SCENARIOS)
            e = aggregate(r for r in rs if r.scenario == GROWING)
            lines.append(
                f"| {budget:,} | {method} | {row.requests} | {row.refused} | {row.over} | "
                f"{row.broken} | {_pct(row.reach_share)} ({_share(row.reachable, row.probes)}) | "
                f"{_pct(row.inline / row.probes if row.probes else None)} | {row.stale} | "
                f"{_pct(bd.saved)} | {_pct(e.prefix_share)} |"
            )
    return "\n".join(lines)


def scenario_table(
    records: list[Record], method: str, budgets: list[int], scenarios: list[str]
) -> str:
    lines = [
        f"| scenario | budget | requests | mean tokens full → {method} | saved | refused | "
        "over budget | broken pairs | evidence reachable | via artifact | cached prefix |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for scenario in scenarios:
        for budget in budgets:
            rs = [
                r
                for r in records
                if r.method == method and r.budget == budget and r.scenario == scenario
            ]
            row = aggregate(rs)
            fwd = row.requests - row.refused
            mean = f"{row.before // fwd:,} → {row.after // fwd:,}" if fwd else "— (all refused)"
            lines.append(
                f"| {scenario} | {budget:,} | {row.requests} | {mean} | {_pct(row.saved)} | "
                f"{row.refused} | {row.over} | {row.broken} | {_pct(row.reach_share)} | "
                f"{row.reachable - row.inline} | {_pct(row.prefix_share)} |"
            )
    return "\n".join(lines)


def misses(records: list[Record], method: str, growing: str = GROWING) -> str:
    """Where `method` lost evidence or the cached prefix (on `growing`), tallied by cause."""
    lost: Counter[str] = Counter()
    broken: Counter[str] = Counter()
    for r in records:
        if r.method != method:
            continue
        o = r.outcome
        missing = o.reach.count("missing")
        if missing:
            cause = o.note.split(" (")[0] if o.refused else "not in prompt or artifacts"
            lost[f"{r.scenario} @ {r.budget:,}: {cause}"] += missing
        if r.scenario == growing and o.prompt_tokens:
            cause = o.break_cause or "no break: only the appended messages"
            broken[f"{r.budget:,}: {cause}"] += o.prompt_tokens - o.prefix_tokens
    out = [f"Evidence missing for `{method}` (probes, by scenario @ budget: cause):"]
    out += [f"- {k}: {v}" for k, v in sorted(lost.items())] or ["- none"]
    out.append(
        f"\nUncached prompt tokens of `{method}` on {growing}, by budget and by what "
        "changed first relative to the previous prompt:"
    )
    out += [f"- {k}: {v:,} tokens" for k, v in sorted(broken.items())] or ["- none"]
    return "\n".join(out)


def _prefix_share(
    records: list[Record], method: str, budget: int, scenario: str = GROWING
) -> float | None:
    """`method`'s cached-prefix share on a growing conversation at `budget`."""
    return aggregate(
        r for r in records if r.method == method and r.scenario == scenario and r.budget == budget
    ).prefix_share


def prefix_ceiling_note(
    records: list[Record], budgets: list[int], method: str = DEFAULT_METHOD
) -> str:
    """Why the cached-prefix share on E is bounded: each turn's new messages are never cached."""
    full = sorted(
        (
            r
            for r in records
            if r.method == "full history" and r.scenario == GROWING and r.budget == budgets[0]
        ),
        key=lambda r: r.seed,
    )
    per_seed: dict[int, list[int]] = {}
    for r in full:
        per_seed.setdefault(r.seed, []).append(r.outcome.tokens_before)
    growth = [(t[-1] - t[0]) / (len(t) - 1) for t in per_seed.values() if len(t) > 1]
    if not growth:
        return ""
    turn = sum(growth) / len(growth)
    rows = [
        f"{b:,}: {method} {_pct(_prefix_share(records, method, b))}, reference "
        f"{_pct(_prefix_share(records, REFERENCE_METHOD, b))}, "
        f"one turn = {100 * turn / b:.1f}% of the budget"
        for b in budgets
    ]
    return (
        f"Cached prefix on E: a turn adds {turn:,.0f} tokens on average (full history), and "
        "a turn's new messages are never a cached prefix. The fill-and-restart reference "
        "shows what that leaves at each budget: " + "; ".join(rows) + "."
    )


@dataclass(frozen=True)
class Goal:
    text: str
    met: bool
    detail: str


def goals(records: list[Record], budgets: list[int], method: str = DEFAULT_METHOD) -> list[Goal]:
    rs = [r for r in records if r.method == method]
    reach = {b: aggregate(r for r in rs if r.budget == b) for b in budgets}
    saved = {
        (s, b): aggregate(r for r in rs if r.scenario == s and r.budget == b).saved
        for s in REDUCTION_SCENARIOS
        for b in budgets
    }
    prefix = {b: _prefix_share(records, method, b) for b in budgets}
    ceiling = {b: _prefix_share(records, REFERENCE_METHOD, b) for b in budgets}
    total = aggregate(rs)
    return [
        Goal(
            "evidence reachable for 100% of probes at every budget",
            all(row.reachable == row.probes for row in reach.values()),
            ", ".join(f"{b:,}: {_pct(row.reach_share)}" for b, row in reach.items()),
        ),
        Goal("0 budget overruns", total.over == 0, f"{total.over} overruns"),
        Goal("0 broken tool pairs", total.broken == 0, f"{total.broken} requests"),
        Goal(
            ">= 70% fewer input tokens than full history on B-D",
            all(v is not None and v >= 0.7 for v in saved.values()),
            ", ".join(f"{s}@{b:,}: {_pct(v)}" for (s, b), v in saved.items()),
        ),
        Goal(
            ">= 90% cached-prefix share on E",
            all(v is not None and v >= 0.9 for v in prefix.values()),
            ", ".join(
                f"{b:,}: {_pct(v)} (fill-and-restart reference {_pct(ceiling[b])})"
                for b, v in prefix.items()
            ),
        ),
    ]


def goals_text(items: list[Goal]) -> str:
    return "\n".join(
        f"- [{'x' if g.met else ' '}] {g.text} — {'met' if g.met else 'MISSED'} ({g.detail})"
        for g in items
    )


def write_section(path: Path, section: str) -> None:
    """Replace (or append) the `## Policy quality` section, leaving every other section as is."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    body = f"{HEADING}\n\n{section.strip()}\n"
    match = re.search(rf"^{re.escape(HEADING)}\s*$", text, flags=re.MULTILINE)
    if match is None:
        text = text.rstrip("\n") + "\n\n" + body
    else:
        following = re.search(r"^## ", text[match.end() :], flags=re.MULTILINE)
        end = match.end() + following.start() if following else len(text)
        tail = text[end:]
        text = text[: match.start()] + body + ("\n" + tail if tail else "")
    path.write_text(text)


def outcome_notes(records: list[Record], methods: list[str]) -> str:
    """Per method, how its requests ended (ctxproxy manifest outcomes, baseline failures)."""
    lines = []
    for method in methods:
        notes = Counter(
            r.outcome.note.split(" (")[0] for r in records if r.method == method and r.outcome.note
        )
        if notes:
            lines.append(f"- {method}: " + ", ".join(f"{k} {v}" for k, v in sorted(notes.items())))
    return "\n".join(lines) or "- none"


def agent_table(
    records: list[Record], methods: list[str], budgets: list[int], scenario: str
) -> str:
    """The sessions with large turns: per budget and method, the cached-prefix share (next to
    the fill-and-restart reference) and what it cost in evidence, budget and tool pairs."""
    lines = [
        "| budget | method | requests | refused | over budget | broken pairs | evidence "
        "reachable | inline | mean tokens sent | cached prefix | vs reference |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for budget in budgets:
        reference = _prefix_share(records, REFERENCE_METHOD, budget, scenario)
        for method in methods:
            row = aggregate(
                r
                for r in records
                if r.budget == budget and r.method == method and r.scenario == scenario
            )
            if not row.requests:
                continue
            share = row.prefix_share
            fwd = row.requests - row.refused
            gap = (
                "—"
                if share is None or reference is None
                else f"{100 * (share - reference):+.1f} pts"
            )
            lines.append(
                f"| {budget:,} | {method} | {row.requests} | {row.refused} | {row.over} | "
                f"{row.broken} | {_pct(row.reach_share)} ({_share(row.reachable, row.probes)}) | "
                f"{_pct(row.inline / row.probes if row.probes else None)} | "
                f"{row.after // fwd if fwd else 0:,} | {_pct(share)} | {gap} |"
            )
    return "\n".join(lines)


def prefix_goal(
    records: list[Record], budgets: dict[str, list[int]], method: str = DEFAULT_METHOD
) -> Goal:
    """`method`'s cached-prefix share at or above the fill-and-restart reference, per growing
    scenario and budget."""
    cells = []
    met = True
    for scenario, scenario_budgets in budgets.items():
        for budget in scenario_budgets:
            share = _prefix_share(records, method, budget, scenario)
            reference = _prefix_share(records, REFERENCE_METHOD, budget, scenario)
            ok = share is not None and reference is not None and share >= reference
            met = met and ok
            cells.append(f"{scenario}@{budget:,}: {_pct(share)} vs {_pct(reference)}")
    return Goal(
        "cached-prefix share >= the fill-and-restart reference on every growing "
        "session at every budget",
        met,
        ", ".join(cells),
    )
