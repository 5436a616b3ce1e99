"""Probe evaluation by category: what a prepared prompt still holds of facts (current values),
the artifact trail (files, ids, patterns, commands the calls touched), the continuation (the last
user request, verbatim) and the decisions, per method and budget, on a coding, a research and a
JSON/log-heavy scenario (`categories_gen`). Each probe is judged as `judge.py` does: inline in
the prepared prompt, or reachable through artifacts via the read tool.

    python -m bench.quality.categories [--seeds 1] [--budgets 900,4000,16000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bench.quality.categories_gen import CATEGORIES, CategoryCase, build_all
from bench.quality.judge import Judge
from bench.quality.methods import all_methods, derived_policies
from bench.quality.text import MODEL
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

POLICIES = Path(__file__).parent / "policies"
METHODS = {
    "default": "window (default)",
    "default-nocondense": "window, condense off",
    "compact": "compact, extract",
    "compact-scripted": "compact, scripted summary",
}
BUDGETS = (900, 4_000, 16_000)


@dataclass
class Tally:
    """Probe counts of one method x budget (x scenario) per category."""

    total: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    inline: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    reachable: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    refused: int = 0
    requests: int = 0

    def add(self, category: str, reach: list[str]) -> None:
        self.total[category] += len(reach)
        self.inline[category] += reach.count("inline")
        self.reachable[category] += sum(r != "missing" for r in reach)

    def cell(self, category: str) -> str:
        n = self.total[category]
        if not n:
            return "-"
        return f"{100 * self.inline[category] / n:.0f} / {100 * self.reachable[category] / n:.0f}"


Key = tuple[str, int, str]
"""(method, budget, scenario key or "all")."""


async def evaluate(
    cases: list[CategoryCase], budgets: list[int], counters: TokenCounters, catalog: ModelCatalog
) -> dict[Key, Tally]:
    counter = counters.for_model(MODEL)
    tallies: dict[Key, Tally] = defaultdict(Tally)
    with derived_policies(budgets, catalog, POLICIES) as (policies, presets):
        chosen = [p for p in METHODS if p in presets]
        methods = all_methods(counters, catalog, policies, chosen, litellm=False)
        for method in (m for m in methods if m.kind == "preset"):
            preset = method.name.removeprefix("ctxproxy ")
            for budget in budgets:
                for case in cases:
                    result = await method.session(budget).prepare(case.body)
                    probes = [p for c in CATEGORIES for p in case.probes[c]]
                    outcome = await Judge(counter, budget).judge(case.body, result, probes)
                    for key in ((preset, budget, case.key), (preset, budget, "all")):
                        _record(tallies[key], case, outcome.reach, outcome.refused)
    return tallies


def _record(tally: Tally, case: CategoryCase, reach: list[str], refused: bool) -> None:
    tally.requests += 1
    tally.refused += refused
    start = 0
    for category in CATEGORIES:
        n = len(case.probes[category])
        tally.add(category, reach[start : start + n])
        start += n


def table(tallies: dict[Key, Tally], budgets: list[int], scenario: str = "all") -> str:
    head = "| method | budget | " + " | ".join(CATEGORIES) + " | refused |"
    lines = [head, "|---|---:|" + "---:|" * len(CATEGORIES) + "---:|"]
    for preset, label in METHODS.items():
        for budget in budgets:
            tally = tallies.get((preset, budget, scenario))
            if tally is None:
                continue
            cells = " | ".join(tally.cell(c) for c in CATEGORIES)
            lines.append(
                f"| {label} | {budget:,} | {cells} | {tally.refused}/{tally.requests} |"
            )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.quality.categories")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 1..N (default 1)")
    parser.add_argument("--budgets", default=",".join(str(b) for b in BUDGETS))
    parser.add_argument("--by-scenario", action="store_true", help="also one table per scenario")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    cases = [c for seed in range(1, args.seeds + 1) for c in build_all(seed)]
    tallies = asyncio.run(evaluate(cases, budgets, TokenCounters(), ModelCatalog()))
    print("Cells: inline % / reachable % (inline, or via the read tool) of each category's probes")
    print(table(tallies, budgets))
    if args.by_scenario:
        for key in dict.fromkeys(c.key for c in cases):
            print(f"\n{key}:\n" + table(tallies, budgets, key))
    return 0


if __name__ == "__main__":
    sys.exit(main())
