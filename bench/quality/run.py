"""Policy quality: how well each ctxproxy preset (and three baselines) prepares long agent
conversations at small, medium and large budgets.

    python -m bench.quality            # 3 seeds, budgets 900 / 4,000 / 16,000 (A-E) and
                                       # 8,000 / 16,000 / 32,000 (F); updates RESULTS.md
    python -m bench.quality --quick    # 1 seed, E shortened to 80 turns; prints only

Scenarios come from a seeded generator (`bench.quality.gen`, F from `bench.quality.gen_agent`);
every request is judged by `bench.quality.judge` and the tables are built by
`bench.quality.report`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

from bench.quality.gen import generate
from bench.quality.gen_agent import AGENT_KEY, AGENT_TITLE, agent_session
from bench.quality.judge import Judge
from bench.quality.methods import all_methods, derived_policies
from bench.quality.report import (
    DEFAULT_METHOD,
    GROWING,
    Record,
    agent_table,
    goals,
    goals_text,
    main_table,
    misses,
    outcome_notes,
    prefix_ceiling_note,
    prefix_goal,
    scenario_table,
    write_section,
)
from bench.quality.text import MODEL, TITLES, Scenario
from proxy.jsonio import dumps
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

BUDGETS = [900, 4_000, 16_000]
AGENT_BUDGETS = [8_000, 16_000, 32_000]
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="1 seed, E with 80 turns; prints only (no RESULTS.md update)",
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N (default 3)")
    parser.add_argument(
        "--budgets",
        type=lambda s: [int(x) for x in s.split(",")],
        default=BUDGETS,
        help="comma-separated token budgets",
    )
    parser.add_argument("--turns", type=int, default=200, help="turns of scenario E")
    parser.add_argument(
        "--agent-budgets",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=AGENT_BUDGETS,
        help="comma-separated token budgets of scenario F (empty: skip F)",
    )
    parser.add_argument("--agent-turns", type=int, default=80, help="turns of scenario F")
    parser.add_argument("--agent-only", action="store_true", help="only scenario F (prints only)")
    parser.add_argument(
        "--policies",
        type=Path,
        default=None,
        help="directory of extra policy files to evaluate as presets "
        "(they may extend the bundled ones)",
    )
    parser.add_argument("--no-litellm", action="store_true", help="skip the litellm baseline")
    parser.add_argument(
        "--presets",
        type=lambda s: tuple(x for x in s.split(",") if x),
        default=None,
        help="comma-separated presets to evaluate (default: all)",
    )
    parser.add_argument(
        "--detail", action="store_true", help="also print the per-scenario table of every method"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="RESULTS.md to update")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="also write every judged request as one JSON line to this file",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(os.cpu_count() or 1, 4),
        help="worker processes (default: CPUs, at most 4)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.turns, args.no_write = 1, 80, True
    if args.agent_only:
        args.budgets, args.no_write = [], True
    return args


async def evaluate(
    scenarios: list[Scenario],
    budgets: list[int],
    counters: TokenCounters,
    catalog: ModelCatalog,
    *,
    litellm: bool = True,
    extra: Path | None = None,
    only: tuple[str, ...] | None = None,
) -> tuple[list[Record], list[str]]:
    """Every method x budget x scenario; each scenario's requests run as one session.
    `only`: the presets to evaluate (default: every one)."""
    counter = counters.for_model(MODEL)
    records: list[Record] = []
    with derived_policies(budgets, catalog, extra) as (policies, presets):
        chosen = [p for p in presets if only is None or p in only]
        methods = all_methods(counters, catalog, policies, chosen, litellm=litellm)
        for budget in budgets:
            for method in methods:
                for scenario in scenarios:
                    session = method.session(budget)
                    judge = Judge(counter, budget)
                    for request in scenario.requests:
                        result = await session.prepare(request.body)
                        outcome = await judge.judge(request.body, result, request.probes)
                        records.append(
                            Record(scenario.key, scenario.seed, method.name, budget, outcome)
                        )
    return records, [m.name for m in methods]


@dataclass(frozen=True)
class Task:
    seed: int
    budget: int
    turns: int
    litellm: bool
    extra: Path | None
    agent: bool = False
    """Scenario F (with `turns` turns) instead of A-E."""
    presets: tuple[str, ...] | None = None


def scenarios_of(task: Task) -> list[Scenario]:
    if task.agent:
        return [agent_session(task.seed, task.turns)]
    return generate(task.seed, growing_turns=task.turns)


def run_task(task: Task) -> tuple[list[Record], list[str]]:
    """One seed at one budget, self-contained so that it can run in a worker process."""
    return asyncio.run(
        evaluate(
            scenarios_of(task),
            [task.budget],
            TokenCounters(),
            ModelCatalog(),
            litellm=task.litellm,
            extra=task.extra,
            only=task.presets,
        )
    )


def run_all(args: argparse.Namespace) -> tuple[list[Record], list[str]]:
    litellm = not args.no_litellm
    seeds = range(1, args.seeds + 1)
    tasks = [
        Task(seed, budget, args.turns, litellm, args.policies, presets=args.presets)
        for seed in seeds
        for budget in args.budgets
    ]
    tasks += [
        Task(
            seed, budget, args.agent_turns, litellm, args.policies, agent=True, presets=args.presets
        )
        for seed in seeds
        for budget in args.agent_budgets
    ]
    if args.jobs > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(run_task, tasks))
    else:
        results = [run_task(task) for task in tasks]
    return [r for records, _ in results for r in records], results[0][1]


def sizes_table(scenarios: list[Scenario], counters: TokenCounters) -> str:
    counter = counters.for_model(MODEL)
    lines = [
        "| scenario | what | requests per seed | messages (last request) | "
        "tokens (last request, mean over seeds) | probes (last request) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for key, title in {**TITLES, AGENT_KEY: AGENT_TITLE}.items():
        group = [s for s in scenarios if s.key == key]
        if not group:
            continue
        last = [s.requests[-1] for s in group]
        tokens = sum(counter.count_request(r.body) for r in last) // len(last)
        lines.append(
            f"| {key} | {title} | {len(group[0].requests)} | "
            f"{len(last[0].body['messages'])} | {tokens:,} | {len(last[0].probes)} |"
        )
    return "\n".join(lines)


def compose(
    args: argparse.Namespace,
    scenarios: list[Scenario],
    records: list[Record],
    methods: list[str],
    counters: TokenCounters,
    seconds: float,
) -> str:
    keys = list(TITLES)
    command = (
        "python -m bench.quality"
        + (" --quick" if args.quick else "")
        + (f" --presets {','.join(args.presets)}" if args.presets else "")
        + (" --no-litellm" if args.no_litellm else "")
        + (f" --policies {args.policies}" if args.policies else "")
        + (" --agent-only" if args.agent_only else "")
    )
    standard = [r for r in records if r.scenario != AGENT_KEY]
    parts = [
        f"Command: `{command}` (seeds 1-{args.seeds}, budgets "
        f"{' / '.join(f'{b:,}' for b in args.budgets) or 'none'} tokens for A-E and "
        f"{' / '.join(f'{b:,}' for b in args.agent_budgets) or 'none'} for F, E with "
        f"{args.turns} turns, F with {args.agent_turns}, model `{MODEL}` counted with "
        f"o200k_base). Run on {date.today().isoformat()} in {seconds:.0f} s.",
        METHOD_NOTES,
        "### Scenarios\n\n" + sizes_table(scenarios, counters),
    ]
    if args.budgets:
        parts += [
            "### All methods\n\n" + main_table(standard, methods, args.budgets),
            f"### Goals for `{DEFAULT_METHOD}`\n\n"
            + goals_text(
                [*goals(standard, args.budgets), prefix_goal(records, _growing_budgets(args))]
            ),
            f"### `{DEFAULT_METHOD}` per scenario\n\n"
            + scenario_table(standard, DEFAULT_METHOD, args.budgets, keys),
        ]
    if args.agent_budgets:
        parts.append(
            f"### F: {AGENT_TITLE}\n\n"
            + AGENT_NOTES
            + "\n\n"
            + agent_table(records, methods, args.agent_budgets, AGENT_KEY)
        )
    parts.append(
        "### Where it falls short\n\n"
        + misses(standard, DEFAULT_METHOD)
        + "\n\n"
        + misses(records, DEFAULT_METHOD, AGENT_KEY).split("\n\n", 1)[-1]
        + "\n\n"
        + prefix_ceiling_note(standard, args.budgets)
    )
    parts.append("### How requests ended (all budgets)\n\n" + outcome_notes(records, methods))
    return "\n\n".join(parts)


def _size_tasks(args: argparse.Namespace, seed: int) -> list[Task]:
    """The scenario sets the run evaluated (for the sizes table)."""
    tasks = [Task(seed, 0, args.turns, False, None)] if args.budgets else []
    if args.agent_budgets:
        tasks.append(Task(seed, 0, args.agent_turns, False, None, agent=True))
    return tasks


def _growing_budgets(args: argparse.Namespace) -> dict[str, list[int]]:
    out = {GROWING: args.budgets} if args.budgets else {}
    return out | ({AGENT_KEY: args.agent_budgets} if args.agent_budgets else {})


AGENT_NOTES = """\
One request per turn, as in E, but every turn adds about 2,200 tokens (mean; median ~2,000), most
of it one 6.8-7.9 KB tool result (below the default offload threshold, so it stays inline until
a step removes it). *mean tokens sent*: over the forwarded requests. *vs reference*: the cached-
prefix share minus the fill-and-restart reference's at the same budget."""


METHOD_NOTES = """\
How to read it. Each budget is an exact allowance (context window - reserved output - safety
margin): presets get it from a policy file that `extends:` the preset (loaded with the real
`PolicyStore`); the baselines get the same number. *requests*: A-D have one request per seed (the
end of the conversation, probe questions last); E has one request per turn. *refused*: the
method declined to send (ctxproxy's `context_length_exceeded`). *over budget*: sent but larger than
the allowance (tools block included). *broken pairs*: requests whose messages have a tool call
without its result or the reverse. *evidence reachable*: the exact answer string (the current
value, never a superseded one) is in the prepared messages (*inline*), or in an artifact those
messages reference that the offered `read_context_artifact` tool returns for the tenant's scope
(read page by page through `read_tool.execute`); a refused request reaches nothing. On E every
turn checks every fact stated so far. *stale only*: probes where a superseded value is visible
and the current one is not. *saved B-D*: 1 - Σ tokens sent / Σ full-history tokens over the
requests that were sent. *cached prefix E*: tokens of each prompt (tools block, then messages)
that are byte-identical, whole element by element from the start, to the previous sent prompt,
over all tokens of the prompts that have a previous one. Baselines: *sliding window* keeps the
system prompt and drops the oldest other messages until the request fits (naive: may split
tool exchanges); *litellm trim_messages* is `litellm.utils.trim_messages` with `max_tokens` =
allowance - tools block; *fill-and-restart (reference)* is not a usable method but a yardstick
for the cached-prefix share: it sends the whole history while it fits, then restarts from the
system prompt and the current turn, losing everything older. Its prompts are either the previous
prompt plus the new messages or as short as they can be, so its share is about the most that any
reduction keeping every request within the budget reaches on E: every turn's new messages are
uncached, and they are a larger part of a smaller budget."""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    records, methods = run_all(args)
    counters = TokenCounters()
    scenarios = [
        s
        for seed in range(1, args.seeds + 1)
        for task in _size_tasks(args, seed)
        for s in scenarios_of(task)
    ]
    seconds = time.perf_counter() - started
    section = compose(args, scenarios, records, methods, counters, seconds)
    print(section)
    if args.detail:
        for method in methods:
            print(f"\n### {method} per scenario\n")
            print(scenario_table(records, method, args.budgets, list(TITLES)))
    if args.json:
        with args.json.open("wb") as out:
            out.writelines(dumps(asdict(r)) + b"\n" for r in records)
    if not args.no_write:
        write_section(args.results, section)
        print(f"\nupdated {args.results}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
