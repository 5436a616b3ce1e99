"""What `condense_tool_results` saves and costs: counted tokens before and after on machine-made
tool output, and the milliseconds per MB of output the transforms take.

    python -m bench.overhead.condense [--rows 400] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable

from proxy.engine.condense_text import condense, expand
from proxy.tokens.counters import TokenCounters


def array_of_objects(rows: int, seed: int = 1) -> str:
    """A search-API-like result: `rows` objects with the same keys, pretty-printed."""
    rng = random.Random(seed)
    items = [
        {
            "id": 100_000 + i,
            "name": f"customer-{rng.randrange(10**6):06d}",
            "email": f"user{i}@example.com",
            "status": rng.choice(["active", "suspended", "pending"]),
            "plan": rng.choice(["free", "pro", "team"]),
            "balance": round(rng.uniform(0, 5000), 2),
            "created_at": f"2025-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T10:00:00Z",
            "tags": rng.sample(["vip", "eu", "us", "trial", "churn-risk"], 2),
            "manager": None if i % 4 else {"id": i % 17, "name": "Dana"},
        }
        for i in range(rows)
    ]
    return json.dumps(items, indent=2)


def test_log(lines: int) -> str:
    out = [
        f"2025-06-01 12:{i // 60 % 60:02d}:{i % 60:02d} tests/test_api.py::test_case_{i} PASSED"
        for i in range(lines)
    ]
    return "\n".join(["collected tests", *out, "FAILED tests/test_db.py::test_x", "done"])


def pretty_json(keys: int) -> str:
    return json.dumps(
        {f"section_{k}": {"enabled": k % 2 == 0, "limits": [k, k * 2]} for k in range(keys)},
        indent=4,
    )


FIXTURES: dict[str, Callable[[int], str]] = {
    "array of objects": array_of_objects,
    "test log": lambda n: test_log(n * 10),
    "pretty JSON": lambda n: pretty_json(n),
}


def measure(name: str, text: str, runs: int) -> str:
    counter = TokenCounters().for_model("gpt-4o")
    condensed = condense(text)
    assert condensed is not None and expand(condensed) is not None
    best = min(_timed(text) for _ in range(runs))
    before, after = counter.count_text(text), counter.count_text(condensed.body)
    mb = len(text.encode()) / 1e6
    return (
        f"| {name} | {condensed.kind} | {len(text):,} | {before:,} | {after:,} | "
        f"{1 - after / before:.1%} | {best * 1000 / mb:.0f} |"
    )


def _timed(text: str) -> float:
    start = time.perf_counter()
    condense(text)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    print("| fixture | transform | chars | tokens before | tokens after | saved | ms per MB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, make in FIXTURES.items():
        print(measure(name, make(args.rows), args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
