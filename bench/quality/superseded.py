"""Superseded values in prepared prompts: the lines that show a fact's earlier value without
its current one.

Scenarios A-E (`gen`) and F (`gen_agent`) are prepared request by request by a preset at each
budget, as `python -m bench.quality` does. Every line of every prepared message is checked
against every probe of that request that has superseded values: a line *counts* when it names a
superseded value (as a whole token, not inside a longer one) and does not name the current value
on the same line. The counted lines are split three ways: those the proxy states (the items it
writes, starting with its marker: summaries, the item after a summary, notices, a cleared
result's placeholder; the goal is none), the tool output it shows shortened (the lines under
the header of an offloaded result's preview or a condensed result: the tool's own bytes, as the
unreduced prompt shows them at the same place), and the client's own messages kept verbatim (a
statement made before a later correction: the proxy leaves those as they are).

    python -m bench.quality.superseded [--seeds 1] [--budgets 900,4000,16000]
        [--agent-budgets 8000,16000,32000] [--presets compact] [--turns 80] [--show 5]
        [--policies bench/quality/policies]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.quality.gen import generate
from bench.quality.gen_agent import agent_session
from bench.quality.judge import message_texts
from bench.quality.methods import Preset, derived_policies
from bench.quality.text import Probe, Scenario
from proxy.engine.step_api import MARKER
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

BUDGETS = (900, 4_000, 16_000)
AGENT_BUDGETS = (8_000, 16_000, 32_000)
_SHORTENED = re.compile(r"tool result (?:offloaded|condensed)")
"""The header of a tool result shown shortened: the lines under it are the tool's own."""


def names(line: str, value: str) -> bool:
    """Whether `line` names `value` whole (not inside a longer token: `8080` is not in `18080`)."""
    return re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", line) is not None


def stale_lines(text: str, probes: list[Probe]) -> list[str]:
    """The lines of `text` that name a probe's superseded value without its current value."""
    return [
        line for line in text.splitlines()
        for p in probes
        if any(names(line, old) for old in p.superseded if old != p.evidence)
        and p.evidence not in line
    ]


@dataclass
class Tally:
    """Lines of one preset x budget (x scenario)."""

    lines: int = 0
    """Lines naming a superseded value."""
    proxy: int = 0
    """... of them stated by the proxy, without the current value on the line."""
    shown: int = 0
    """... in tool output the proxy shows shortened (a preview, a condensed result)."""
    client: int = 0
    """... in the client's messages kept verbatim, without the current value on the line."""
    requests: int = 0
    examples: list[str] = field(default_factory=list)


def judge_prompt(messages: list[Any], probes: list[Probe], tally: Tally, show: int) -> None:
    corrected = [p for p in probes if p.superseded]
    tally.requests += 1
    if not corrected:
        return
    for message in messages:
        for text in message_texts(message):
            tally.lines += sum(
                1 for line in text.splitlines()
                if any(names(line, old) for p in corrected for old in p.superseded)
            )
            if not text.startswith(MARKER):
                tally.client += len(stale_lines(text, corrected))
                continue
            header, _, rest = text.partition("\n")
            if _SHORTENED.search(header):
                tally.shown += len(stale_lines(rest, corrected))
                text = header
            found = stale_lines(text, corrected)
            tally.proxy += len(found)
            tally.examples += found[: max(show - len(tally.examples), 0)]


async def run(
    scenarios: list[Scenario], preset: Preset, budget: int, by: dict[tuple[str, int], Tally],
    show: int,
) -> None:
    for scenario in scenarios:
        session = preset.session(budget)
        tally = by.setdefault((scenario.key, budget), Tally())
        for request in scenario.requests:
            result = await session.prepare(request.body)
            if result.body is not None:
                judge_prompt(result.body.get("messages") or [], request.probes, tally, show)


async def evaluate(args: argparse.Namespace) -> dict[str, dict[tuple[str, int], Tally]]:
    counters, catalog = TokenCounters(), ModelCatalog()
    budgets = sorted({*args.budgets, *args.agent_budgets})
    out: dict[str, dict[tuple[str, int], Tally]] = {}
    with derived_policies(budgets, catalog, args.policies) as (policies, _):
        for name in args.presets:
            preset = Preset(name, policies, counters, catalog)
            by = out.setdefault(name, {})
            for seed in range(1, args.seeds + 1):
                scenarios = generate(seed, growing_turns=args.turns)
                for budget in args.budgets:
                    await run(scenarios, preset, budget, by, args.show)
                agent = [agent_session(seed, args.turns)]
                for budget in args.agent_budgets:
                    await run(agent, preset, budget, by, args.show)
    return out


def table(by: dict[tuple[str, int], Tally]) -> str:
    rows = [
        "| scenario | budget | requests | lines naming a superseded value | without the current "
        "value: stated by the proxy | tool output shown shortened | client's messages |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    totals: Counter[int] = Counter()
    for (key, budget), t in sorted(by.items()):
        rows.append(f"| {key} | {budget:,} | {t.requests} | {t.lines} | {t.proxy} | {t.shown} "
                    f"| {t.client} |")
        totals[budget] += t.proxy
    rows.append("")
    rows.append("Lines stated by the proxy without the current value, by budget: " + ", ".join(
        f"{b:,}: {n}" for b, n in sorted(totals.items())))
    return "\n".join(rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    def numbers(s: str) -> list[int]:
        return [int(x) for x in s.split(",") if x]

    parser = argparse.ArgumentParser(prog="python -m bench.quality.superseded")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 1..N (default 1)")
    parser.add_argument("--budgets", type=numbers, default=list(BUDGETS), help="A-E budgets")
    parser.add_argument("--agent-budgets", type=numbers, default=list(AGENT_BUDGETS),
                        help="F budgets (empty: skip F)")
    parser.add_argument("--presets", type=lambda s: s.split(","), default=["compact"])
    parser.add_argument("--policies", type=Path, default=None,
                        help="directory of extra policy files (e.g. bench/quality/policies)")
    parser.add_argument("--turns", type=int, default=80, help="turns of E and F (default 80)")
    parser.add_argument("--show", type=int, default=0, help="print up to N counted proxy lines")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = asyncio.run(evaluate(args))
    for name, by in results.items():
        print(f"### {name}\n\n{table(by)}\n")
        examples = [e for t in by.values() for e in t.examples][: args.show]
        for line in examples:
            print(f"    {line[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
