"""Cache-first cuts: the cached-prefix share of growing sessions with small and with large turns
at 8k, 16k, 32k and 128k tokens, each preset beside the fill-and-restart reference.

    python -m bench.quality.cache_first                   # seeds 1-2, every shape and budget
    python -m bench.quality.cache_first --budgets 8000 --shapes large --seeds 1

Each session is long enough to fill its budget `--fills` times (small turns: scenario E's
generator, ~300 tokens a turn; large turns: scenario F's, ~2,200 tokens a turn), so that every
budget sees several cuts. Every request is judged as in `bench.quality` (evidence reachable,
over budget, broken pairs, cached prefix: the tokens of each prompt that are a byte-identical
prefix of the previous prompt).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.quality.gen import growing
from bench.quality.gen_agent import agent_session
from bench.quality.report import REFERENCE_METHOD, Record, Row, aggregate
from bench.quality.run import evaluate
from bench.quality.text import Scenario
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

BUDGETS = [8_000, 16_000, 32_000, 128_000]
TURN_TOKENS = {"small": 300, "large": 2_200}
"""About what a turn adds in each shape (E and F of `bench.quality`)."""
MAX_TURNS = {"small": 1_400, "large": 200}
UNCHANGED = "full history"
CACHE_READ = 0.1
"""A cached input token's price, as a share of an uncached one (Anthropic's and most of
OpenAI's models; cache writes are not priced here)."""
MIN_TURNS = {"small": 200, "large": 80}
"""As `bench.quality` runs E and F: enough cuts at the small budgets to compare."""


@dataclass(frozen=True)
class Cell:
    shape: str
    budget: int
    seed: int
    fills: float
    presets: tuple[str, ...]
    policies: Path | None


def turns_of(shape: str, budget: int, fills: float) -> int:
    wanted = math.ceil(fills * budget / TURN_TOKENS[shape]) + 2
    return min(MAX_TURNS[shape], max(MIN_TURNS[shape], wanted))


def scenario_of(cell: Cell) -> Scenario:
    turns = turns_of(cell.shape, cell.budget, cell.fills)
    small = cell.shape == "small"
    scenario = growing(cell.seed, turns) if small else agent_session(cell.seed, turns)
    scenario.key = cell.shape
    return scenario


def run_cell(cell: Cell) -> list[Record]:
    records, _ = asyncio.run(
        evaluate(
            [scenario_of(cell)],
            [cell.budget],
            TokenCounters(),
            ModelCatalog(),
            litellm=False,
            extra=cell.policies,
            only=cell.presets,
        )
    )
    wanted = set(methods_of(cell.presets))
    return [r for r in records if r.method in wanted]


def methods_of(presets: tuple[str, ...]) -> list[str]:
    """The methods compared, in the table's order: unchanged, the reference, the presets."""
    return [UNCHANGED, REFERENCE_METHOD, *(f"ctxproxy {p}" for p in presets)]


def billed(row: Row) -> float:
    """Input billed in uncached-token units: a cached token at CACHE_READ of the price."""
    return (row.prompt - row.prefix) + CACHE_READ * row.prefix


def table(records: list[Record], cells: list[Cell], methods: list[str]) -> str:
    lines = [
        "| shape | budget | turns | method | cached prefix | vs reference | input billed vs "
        "unchanged | evidence reachable | over budget | refused | broken pairs |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    keys = sorted({(c.shape, c.budget, c.fills) for c in cells}, key=lambda k: (k[0], k[1]))
    for shape, budget, fills in keys:
        mine = [r for r in records if r.scenario == shape and r.budget == budget]
        reference = aggregate(r for r in mine if r.method == REFERENCE_METHOD).prefix_share
        unchanged = billed(aggregate(r for r in mine if r.method == UNCHANGED))
        for method in methods:
            row = aggregate(r for r in mine if r.method == method)
            if not row.requests:
                continue
            share = row.prefix_share
            gap = "" if method == REFERENCE_METHOD or share is None or reference is None else (
                f"{100 * (share - reference):+.1f} pts"
            )
            reach = f"{row.reachable}/{row.probes}" if row.probes else "-"
            cost = _pct(billed(row) / unchanged) if unchanged else "-"
            lines.append(
                f"| {shape} | {budget:,} | {turns_of(shape, budget, fills)} | {method} | "
                f"{_pct(share)} | {gap} | {cost} | {reach} | {row.over} | {row.refused} | "
                f"{row.broken} |"
            )
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.quality.cache_first", description=__doc__
    )
    split = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    parser.add_argument("--budgets", type=lambda s: [int(x) for x in split(s)], default=BUDGETS)
    parser.add_argument("--shapes", type=split, default=["small", "large"])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--fills", type=float, default=3.0, help="history / budget")
    parser.add_argument("--presets", type=lambda s: tuple(split(s)), default=("default",))
    parser.add_argument("--policies", type=Path, default=None, help="extra policy directory")
    parser.add_argument("--jobs", type=int, default=2)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    cells = [
        Cell(shape, budget, seed, args.fills, args.presets, args.policies)
        for budget in args.budgets
        for shape in args.shapes
        for seed in range(1, args.seeds + 1)
    ]
    # the largest cells first, so that the pool ends together
    order = sorted(cells, key=lambda c: -c.budget)
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        records = [r for rs in pool.map(run_cell, order) for r in rs]
    methods = methods_of(args.presets)
    print(table(records, cells, methods))
    print(f"\n{len(records)} requests judged in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
