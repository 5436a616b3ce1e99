"""Preparation cost and prefix stability.

    python -m bench.overhead.prepare [--quick]

Part 1: time `Preparer.prepare()` on agent histories of ~10 KB, 100 KB, 1 MB and 5 MB, cold (fresh
token cache and store) and warm (the same history again, as when an agent re-sends it each turn),
for a policy that leaves the history alone (under the trigger) and one that must reduce it.
Part 2: a conversation growing turn by turn for 200 turns under a small window: the share of each
turn's prepared prompt (in tokens) that the next turn's prepared prompt keeps as its prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

from pipeline_harness import Harness, agent_history, make_harness, write_policy

from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.tokens.counters import TokenCounters

SIZES = {"10 KB": 10_000, "100 KB": 100_000, "1 MB": 1_000_000, "5 MB": 5_000_000}
LOOSE = "extends: default\nbudget: {context_window: 10000000}\n"
TIGHT = "extends: default\nbudget: {context_window: 32000, reserved_output: 2000}\n"
GROWING = (
    "extends: default\nbudget: {context_window: 16000, reserved_output: 1000, trigger: 0.9, "
    "target: 0.5}\n"
)


def history_of(size: int) -> list[dict[str, Any]]:
    """~`size` bytes of agent history with ~500 messages at 1 MB (results scale with size)."""
    turns = max(2, min(125, size // 2000))
    per_result = max(200, size // turns - 200)
    return agent_history(turns, result_chars=per_result)


def harness(policy: str) -> Harness:
    """A fresh token cache and store; the encoding itself is loaded before timing starts."""
    directory = Path(tempfile.mkdtemp())
    write_policy(directory, policy)
    counters = TokenCounters()
    counters.for_model("gpt-4o").count_text("load the encoding")
    return make_harness(directory, counters)


async def time_prepare(h: Harness, body: dict[str, Any], runs: int) -> list[float]:
    raw = orjson.dumps(body)
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        await h.preparer.prepare(body, raw, _tenant(), OPENAI_CHAT)
        out.append((time.perf_counter() - start) * 1000)
    return out


def _tenant() -> Any:
    from pipeline_harness import TENANT

    return TENANT


async def part_one(runs: int) -> None:
    print("| history | messages | policy | cold ms | warm p50 ms | warm p90 ms | outcome |")
    print("|---|---|---|---|---|---|---|")
    for label, size in SIZES.items():
        body = {"model": "gpt-4o", "messages": history_of(size)}
        for name, policy in (("10M window", LOOSE), ("32k window", TIGHT)):
            h = harness(policy)
            cold = await time_prepare(h, body, 1)
            warm = await time_prepare(h, body, runs)
            raw = orjson.dumps(body)
            prepared = await h.preparer.prepare(body, raw, _tenant(), OPENAI_CHAT)
            p90 = statistics.quantiles(warm, n=10)[-1] if len(warm) >= 10 else max(warm)
            print(
                f"| {label} ({len(raw) / 1e6:.2f} MB) | {len(body['messages'])} | {name} "
                f"| {cold[0]:.1f} | {statistics.median(warm):.2f} | {p90:.2f} "
                f"| {prepared.manifest.outcome} |"
            )


async def part_two(turns: int) -> None:
    h = harness(GROWING)
    counter = h.counters.for_model("gpt-4o")
    history = agent_history(turns, result_chars=900, seed=7)
    previous: list[Any] | None = None
    kept = total = changed = 0
    times = []
    for n in range(1, turns + 1):
        body = {"model": "gpt-4o", "messages": history[: 2 + n * 4 - 1]}
        start = time.perf_counter()
        prepared = await h.preparer.prepare(body, orjson.dumps(body), _tenant(), OPENAI_CHAT)
        times.append((time.perf_counter() - start) * 1000)
        messages = prepared.parsed["messages"]
        changed += prepared.changed
        if previous is not None:
            same = 0
            while same < min(len(previous), len(messages)) and previous[same] == messages[same]:
                same += 1
            kept += sum(counter.count_message(m) for m in previous[:same])
            total += sum(counter.count_message(m) for m in previous)
        previous = messages
    print(
        f"\n{turns} turns, window 16000: reduced on {changed} turns; cached-prefix share "
        f"{kept / total:.1%}; prepare p50 {statistics.median(times):.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    asyncio.run(part_one(runs=5 if args.quick else 21))
    asyncio.run(part_two(turns=200))


if __name__ == "__main__":
    main()
