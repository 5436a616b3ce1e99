"""The Responses API through the engine: preparation cost and prefix stability on Codex-like
histories (per turn: a user message, a reasoning item with encrypted content, a function call,
its output, the answer).

    python -m bench.overhead.prepare_responses [--turns 200]

Part 1: time `Preparer.prepare()` (OPENAI_RESPONSES) on a ~1 MB history, cold and warm, under a
window that leaves it alone and one that must reduce it. Part 2: the history growing turn by turn
under a 16k window: on how many turns it was reduced, the share of each prepared prompt (tokens)
that the next one keeps as its prefix, and that no prepared input ever split a call from its
output or changed a reasoning item.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

from pipeline_harness import TENANT, Harness, make_harness, write_policy

from proxy.formats.openai_responses import OPENAI_RESPONSES
from proxy.tokens.counters import TokenCounters

LOOSE = "extends: default\nbudget: {context_window: 10000000}\n"
TIGHT = "extends: default\nbudget: {context_window: 32000, reserved_output: 2000}\n"
GROWING = (
    "extends: default\nbudget: {context_window: 16000, reserved_output: 1000, trigger: 0.9, "
    "target: 0.5}\n"
)


def codex_turn(turn: int, rng: random.Random, output_chars: int) -> list[dict[str, Any]]:
    words = " ".join(f"w{rng.randrange(5000)}" for _ in range(output_chars // 6))
    return [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": f"step {turn}: look at file {turn}"}],
        },
        {
            "type": "reasoning",
            "id": f"rs_{turn}",
            "summary": [],
            "encrypted_content": "gAAAAB" + "".join(rng.choice("abcdef0123") for _ in range(800)),
        },
        {
            "type": "function_call",
            "id": f"fc_{turn}",
            "call_id": f"call_{turn}",
            "name": "shell",
            "arguments": orjson.dumps({"cmd": ["cat", f"f{turn}"]}).decode(),
        },
        {"type": "function_call_output", "call_id": f"call_{turn}", "output": words},
        {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{turn}",
            "content": [{"type": "output_text", "text": f"File {turn} looks fine."}],
        },
    ]


def history(turns: int, output_chars: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    for turn in range(turns):
        items += codex_turn(turn, rng, output_chars)
    return items


def body_of(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "instructions": "You are a coding agent.",
        "input": items,
        "store": False,
        "tools": [
            {
                "type": "function",
                "name": "shell",
                "parameters": {"type": "object", "properties": {}},
            }
        ],
    }


def harness(policy: str) -> Harness:
    directory = Path(tempfile.mkdtemp())
    write_policy(directory, policy)
    counters = TokenCounters()
    counters.for_model("gpt-4o").count_text("load the encoding")
    return make_harness(directory, counters)


async def part_one(runs: int) -> None:
    body = body_of(history(125, 7_000))
    raw = orjson.dumps(body)
    print("| history | items | policy | cold ms | warm p50 ms | outcome | tokens before -> after |")
    print("|---|---|---|---|---|---|---|")
    for name, policy in (("10M window", LOOSE), ("32k window", TIGHT)):
        h = harness(policy)
        times = []
        for _ in range(runs + 1):
            start = time.perf_counter()
            prepared = await h.preparer.prepare(body, raw, TENANT, OPENAI_RESPONSES)
            times.append((time.perf_counter() - start) * 1000)
        m = prepared.manifest
        print(
            f"| {len(raw) / 1e6:.2f} MB | {len(body['input'])} | {name} | {times[0]:.1f} "
            f"| {statistics.median(times[1:]):.2f} | {m.outcome} "
            f"| {m.tokens_before} -> {m.tokens_after} |"
        )


def check_units(items: list[Any], original: dict[str, Any]) -> None:
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    assert calls == outputs, "a call lost its output (or the reverse)"
    for index, item in enumerate(items):
        if item.get("type") == "reasoning":
            assert item == original[item["id"]], "a reasoning item changed"
            assert items[index + 1].get("type") == "function_call", "reasoning left its call"


async def part_two(turns: int) -> None:
    h = harness(GROWING)
    counter = h.counters.for_model("gpt-4o")
    full = history(turns, 900)
    reasoning = {i["id"]: i for i in full if i.get("type") == "reasoning"}
    previous: list[Any] | None = None
    kept = total = changed = 0
    times = []
    for n in range(1, turns + 1):
        body = body_of(full[: n * 5 - 1])  # up to this turn's output: the model answers next
        start = time.perf_counter()
        prepared = await h.preparer.prepare(body, orjson.dumps(body), TENANT, OPENAI_RESPONSES)
        times.append((time.perf_counter() - start) * 1000)
        items = prepared.parsed["input"]
        check_units(items, reasoning)
        changed += prepared.changed
        if previous is not None:
            same = 0
            while same < min(len(previous), len(items)) and previous[same] == items[same]:
                same += 1
            kept += sum(counter.count_message(m) for m in previous[:same])
            total += sum(counter.count_message(m) for m in previous)
        previous = items
    print(
        f"\n{turns} turns, window 16000: reduced on {changed} turns; cached-prefix share "
        f"{kept / total:.1%}; prepare p50 {statistics.median(times):.2f} ms; every call paired "
        "and every reasoning item byte-identical before its call"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(part_one(args.runs))
    asyncio.run(part_two(args.turns))


if __name__ == "__main__":
    main()
