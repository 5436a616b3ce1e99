"""Cut points under a moving count ratio: a growing conversation replayed request by request with
the calibration's count ratio held at 1 and with it moving between requests (1.0, 1.1, 0.95, ...,
as an upstream's reported usage moves it after every answer).

    python -m bench.quality.ratio_replay [--turns 80] [--seeds 1] [--presets default,compact]

For each scenario (E: small turns, F: ~2k-token agent turns), preset and budget it prints the
cached-prefix share (as `bench.quality` judges it: tools block, then messages), how many prompts
broke the previous prompt's prefix, and how many of those breaks were not due: the previous
prompt with the new messages appended would have fitted under this request's trigger, so no cut
was called for, and yet an earlier cut moved or an earlier notice or summary was rewritten (the
read tools added once, by the first offload that pays for them, do not count); with the ratio
steady and jittering. Every request of a session goes through one `Preparer` and one
store, as a conversation's requests do.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from dataclasses import dataclass
from typing import Any

from bench.quality.gen import generate
from bench.quality.gen_agent import AGENT_KEY, agent_session
from bench.quality.judge import Judge, Result
from bench.quality.methods import SECRET, derived_name, derived_policies
from bench.quality.summarizer import ScriptedSummarizer
from bench.quality.text import MODEL, Scenario
from proxy.artifacts.store import MemoryStore
from proxy.engine.budget import planned_trigger
from proxy.engine.preparer import Preparer
from proxy.errors import ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.http.auth import Tenant
from proxy.jsonio import dumps
from proxy.synthetic.registry import ARTIFACT_TOOLS
from proxy.tokens.calibration_rule import AppliedRatio, CalibrationKey, RatioSource
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

JITTER = (1.0, 1.1, 0.95, 1.05, 0.9, 1.08, 0.97, 1.02, 0.93, 1.1, 1.0, 0.96)
"""The ratio of each request in turn (cycled): within the 10% an upstream's usage moves it."""
BUDGETS = {"E": [4_000, 16_000], AGENT_KEY: [8_000, 16_000, 32_000]}


@dataclass
class Ratios:
    """A `RatioReader` whose ratio the replay sets before each request."""

    value: float = 1.0

    def applied(self, key: CalibrationKey, contributor: str) -> AppliedRatio:
        if self.value == 1.0:
            return AppliedRatio(1.0, RatioSource.none)
        return AppliedRatio(self.value, RatioSource.own)


@dataclass
class Run:
    prefix: int = 0
    prompt: int = 0
    breaks: int = 0
    undue: int = 0
    refused: int = 0

    @property
    def share(self) -> float:
        return self.prefix / self.prompt if self.prompt else 0.0


def _extension(
    previous: dict[str, Any], sent_before: int, request: dict[str, Any]
) -> dict[str, Any]:
    """The previous prompt with the messages this request added appended."""
    added = request["messages"][sent_before:]
    return {**previous, "messages": [*previous["messages"], *added]}


def _tools_added(previous: dict[str, Any], body: dict[str, Any]) -> bool:
    """The one break by design: the messages kept, the read tools added to the tools block for
    the first time (an offload, as a new result was seen, that saves more than they cost)."""
    old, new = previous.get("tools") or [], body.get("tools") or []
    names = {t.get("function", {}).get("name") for t in new[len(old) :]}
    messages = body["messages"][: len(previous["messages"])] == previous["messages"]
    return messages and new[: len(old)] == old and names == set(ARTIFACT_TOOLS)


async def replay(
    scenario: Scenario, policies: Any, policy: str, counters: TokenCounters, jitter: bool
) -> Run:
    ratios = Ratios()
    store = MemoryStore(SECRET)
    preparer = Preparer(
        policies=policies, counters=counters, catalog=ModelCatalog(), store=store,
        calibration=ratios,
    )  # fmt: skip
    tenant = Tenant("bench", policy, "bench", None, False)
    summarizer = ScriptedSummarizer() if policy.startswith("q-compact-scripted") else None
    counter = counters.for_model(MODEL)
    judge = Judge(counter, 0)
    run, previous, sent_before = Run(), None, 0
    ratio = itertools.cycle(JITTER if jitter else (1.0,))
    for request in scenario.requests:
        ratios.value = next(ratio)
        try:
            prepared = await preparer.prepare(
                request.body, dumps(request.body), tenant, OPENAI_CHAT, summarizer=summarizer
            )
        except ProxyError:
            run.refused += 1
            continue
        body = prepared.parsed
        outcome = await judge.judge(request.body, Result(body), [])
        run.prefix += outcome.prefix_tokens
        run.prompt += outcome.prompt_tokens
        if previous is not None and outcome.break_cause is not None:
            run.breaks += 1
            extended = counter.count_request(_extension(previous, sent_before, request.body))
            # due once over the trigger as planned (`Budget.plan_over`)
            planned = planned_trigger(prepared.manifest.trigger, prepared.manifest.allowance)
            if extended <= planned and not _tools_added(previous, body):
                run.undue += 1
        previous, sent_before = body, len(request.body["messages"])
    return run


def scenarios(seed: int, turns: int) -> list[Scenario]:
    growing = [s for s in generate(seed, growing_turns=turns) if s.key == "E"]
    return [*growing, agent_session(seed, turns)]


async def main_async(args: argparse.Namespace) -> None:
    counters = TokenCounters()
    catalog = ModelCatalog()
    budgets = sorted({b for bs in BUDGETS.values() for b in bs})
    print(
        "| scenario | preset | budget | cached prefix steady | cached prefix jittering | "
        "breaks steady | breaks jittering | breaks not due steady | breaks not due jittering |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    with derived_policies(budgets, catalog) as (policies, _):
        for seed in range(1, args.seeds + 1):
            for scenario in scenarios(seed, args.turns):
                for preset in args.presets:
                    for budget in BUDGETS[scenario.key]:
                        name = derived_name(preset, budget)
                        steady = await replay(scenario, policies, name, counters, False)
                        moving = await replay(scenario, policies, name, counters, True)
                        print(
                            f"| {scenario.key} (seed {seed}) | {preset} | {budget:,} "
                            f"| {steady.share:.1%} | {moving.share:.1%} | {steady.breaks} "
                            f"| {moving.breaks} | {steady.undue} | {moving.undue} |"
                        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.quality.ratio_replay", description=__doc__
    )
    parser.add_argument("--turns", type=int, default=80)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument(
        "--presets", type=lambda s: [p for p in s.split(",") if p], default=["default", "compact"]
    )
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
