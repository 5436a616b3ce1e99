"""Redis round trips and bytes sent per request when an agent re-sends its history.

    python -m bench.overhead.redis_roundtrips [--url redis://127.0.0.1:6379/14] [--no-budgets]

Prepares the same over-budget history 50 times (as an agent re-sends it every turn), then a
history growing by one turn per request for 50 requests, through `Preparer` with a real
`RedisStore`, counting the store's pipelines (round trips) and the bytes of the commands it sends.
The store has the default write budgets of `store.write_budget` (as `ctxproxy serve` gives it),
unless `--no-budgets`. The keys use a fresh prefix and are deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

from pipeline_harness import TENANT, agent_history, write_policy

from proxy.artifacts.budgets import WriteBudget, WriteBudgets
from proxy.artifacts.redis_store import RedisStore
from proxy.engine.preparer import Preparer
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.policy.store import PolicyStore
from proxy.settings import WriteBudgetSettings
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

POLICY = "budget: {context_window: 16000, reserved_output: 1000}\n"


class Counting:
    """Wraps the store's client so every pipeline execution and its command bytes are counted."""

    def __init__(self, store: RedisStore) -> None:
        self.trips = 0
        self.bytes = 0
        client = store._redis
        original = client.pipeline

        def pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = original(*args, **kwargs)
            execute = pipe.execute

            async def counted(*a: Any, **k: Any) -> Any:
                self.trips += 1
                self.bytes += sum(
                    len(arg) if isinstance(arg, bytes) else len(str(arg))
                    for args, _ in pipe.command_stack
                    for arg in args
                )
                return await execute(*a, **k)

            pipe.execute = counted
            return pipe

        client.pipeline = pipeline


async def run(url: str, budgets: bool) -> None:
    directory = Path(tempfile.mkdtemp())
    write_policy(directory, POLICY)
    prefix = f"ctxproxy-bench-{secrets.token_hex(4)}:"
    default = WriteBudgetSettings()
    limits = WriteBudgets(WriteBudget(default.bytes_per_minute, default.max_live_bytes))
    store = RedisStore(
        url, secrets.token_bytes(32), key_prefix=prefix, budgets=limits if budgets else None
    )
    print(f"write budgets: {'store.write_budget defaults' if budgets else 'none'}")
    counting = Counting(store)
    preparer = Preparer(
        policies=PolicyStore.load(directory),
        counters=TokenCounters(),
        catalog=ModelCatalog(),
        store=store,
    )
    try:
        history = agent_history(60, result_chars=12_000)
        body = {"model": "gpt-4o", "messages": history}
        await report("same history re-sent 50 times", preparer, counting, [body] * 50)
        fresh = agent_history(60, result_chars=11_000, seed=1)  # contents not stored yet
        growing = [{"model": "gpt-4o", "messages": fresh[: 2 + 4 * n - 1]} for n in range(11, 61)]
        await report(
            "history growing one turn per request (50 requests)", preparer, counting, growing
        )
    finally:
        keys = [k async for k in store._redis.scan_iter(match=f"{prefix}*")]
        if keys:
            await store._redis.delete(*keys)
        await store.close()


async def report(
    label: str, preparer: Preparer, counting: Counting, bodies: list[dict[str, Any]]
) -> None:
    trips, sent = [], []
    for body in bodies:
        before_trips, before_bytes = counting.trips, counting.bytes
        prepared = await preparer.prepare(body, orjson.dumps(body), TENANT, OPENAI_CHAT)
        assert prepared.changed, "the history must be over the trigger"
        trips.append(counting.trips - before_trips)
        sent.append(counting.bytes - before_bytes)
    print(f"\n{label}: {len(bodies)} requests")
    print("| request | round trips | bytes sent |\n|---|---|---|")
    print(f"| first | {trips[0]} | {sent[0]:,} |")
    print(
        f"| later (median) | {statistics.median(trips[1:]):g} | "
        f"{statistics.median(sent[1:]):,.0f} |"
    )
    print(f"| later (max) | {max(trips[1:])} | {max(sent[1:]):,} |")
    print(f"| total | {sum(trips)} | {sum(sent):,} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--no-budgets", action="store_true", help="a store without budgets")
    arguments = parser.parse_args()
    asyncio.run(run(arguments.url, not arguments.no_budgets))


if __name__ == "__main__":
    main()
