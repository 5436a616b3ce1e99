"""Cold-cache detection: what an agent session with pauses costs with it on and off.

    python -m bench.quality.cold_cache [--turns 80] [--seeds 5] [--pause-every 6]
        [--pause-s 900] [--budgets 16000,32000] [--presets default,compact]

Scenario F (`gen_agent`: ~2k-token turns, one request per turn) goes through one `Preparer` and
one store per run, as a conversation's requests do, on an injected clock: 30 s between requests,
and a pause of `--pause-s` (past the 300 s cache lifetime) before a request with probability
1/`--pause-every` (drawn per seed: pauses at fixed intervals would fall in or out of phase with
the cuts, which decides the result by luck). Figures are summed over the seeds. After each
request the time it was sent is kept (as the completion driver does), and its prepared body goes
to the caching fake's OpenAI cache (`tests/support/fakes/prompt_cache.py`:
automatic prefix caching, 300 s lifetime, one token per 4 bytes of JSON) on the same clock.
Detection off is an upstream whose lifetime is unknown (`prompt_cache.ttl_seconds: null`: cuts
always keep the prefix, as before); on, the default 300 s. Per run: the prompt tokens billed,
those read from the cache, those not, the cost at the model's litellm prices (cached input at
its cache-read price), and the requests whose due cut went deeper (cold) or kept the prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

from fakes.prompt_cache import OpenAICache, chat_blocks

from bench.quality.gen_agent import agent_session
from bench.quality.methods import SECRET, derived_name, derived_policies
from bench.quality.text import MODEL
from proxy.artifacts.store import MemoryStore
from proxy.engine.cache_warmth import note_sent
from proxy.engine.prepare_request import FIRST_CALL
from proxy.engine.preparer import Preparer
from proxy.errors import ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.http.auth import Tenant
from proxy.jsonio import dumps
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters
from proxy.tokens.prices import PriceTable, price_of
from proxy.tokens.usage import TokenUsage

STEP_S = 30.0


@dataclass
class Clock:
    now: float = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Windows:
    """The request's upstream as the preparer sees it: no window to ask, a cache lifetime."""

    ttl: int | None
    upstream_name: str = "bench"

    async def window(self, model: str, *, ask: bool) -> None:
        return None

    def prompt_cache_ttl(self, model: str) -> int | None:
        return self.ttl


@dataclass
class Run:
    input: int = 0
    cached: int = 0
    cost: float = 0.0
    refused: int = 0
    applied: dict[str, int] = field(default_factory=dict)

    @property
    def uncached(self) -> int:
        return self.input - self.cached


async def session(
    requests: list[dict[str, Any]], policies: Any, policy: str, counters: TokenCounters,
    ttl: int | None, pauses: set[int], pause_s: float, run: Run,
) -> None:  # fmt: skip
    clock = Clock()
    store = MemoryStore(SECRET)
    preparer = Preparer(
        policies=policies, counters=counters, catalog=ModelCatalog(), store=store, clock=clock
    )
    cache = OpenAICache(clock)
    prices = PriceTable([], ModelCatalog()).lookup("bench", MODEL)
    tenant = Tenant("bench", policy, "bench", None, False)
    for n, body in enumerate(requests):
        clock.now += pause_s if n in pauses else STEP_S
        try:
            prepared = await preparer.prepare(
                body, dumps(body), tenant, OPENAI_CHAT, Windows(ttl), call=FIRST_CALL
            )
        except ProxyError:
            run.refused += 1
            continue
        if prepared.sent_key is not None:
            await note_sent(store, prepared.sent_key, clock())
        applied = prepared.manifest.cache.applied if prepared.manifest.cache else "none"
        run.applied[applied] = run.applied.get(applied, 0) + 1
        usage = cache.request("bench", chat_blocks(prepared.parsed))
        run.input += usage.input
        run.cached += usage.cache_read
        run.cost += price_of(TokenUsage(usage.input, 0, usage.cache_read, 0), prices) or 0.0
    preparer.close()


def row(label: str, run: Run) -> str:
    share = run.cached / run.input if run.input else 0.0
    return (
        f"| {label} | {run.input:,} | {run.cached:,} ({share:.1%}) | {run.uncached:,} "
        f"| ${run.cost:.4f} | {run.applied.get('deeper_cut', 0)} "
        f"| {run.applied.get('keep_prefix', 0)} | {run.refused} |"
    )


async def main_async(args: argparse.Namespace) -> None:
    counters = TokenCounters()
    sessions = []
    for seed in range(1, args.seeds + 1):
        draw = random.Random(seed)
        pauses = {n for n in range(1, args.turns) if draw.random() < 1 / args.pause_every}
        sessions.append(([r.body for r in agent_session(seed, args.turns).requests], pauses))
    paused = sum(len(p) for _, p in sessions)
    print(
        f"scenario F, seeds 1-{args.seeds}, {args.turns} turns each, {STEP_S:.0f} s between "
        f"requests, {paused} pauses of {args.pause_s:.0f} s in all (1 in {args.pause_every}); "
        f"model {MODEL}\n"
    )
    print(
        "| preset, budget, detection | prompt tokens | cached | uncached | cost (input) "
        "| deeper cuts | prefix-keeping cuts | refused |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with derived_policies(args.budgets, ModelCatalog()) as (policies, _):
        for preset in args.presets:
            for budget in args.budgets:
                name = derived_name(preset, budget)
                for label, ttl in (("off", None), ("on", 300)):
                    run = Run()
                    for requests, pauses in sessions:
                        await session(
                            requests, policies, name, counters, ttl, pauses, args.pause_s, run
                        )
                    print(row(f"{preset}, {budget:,}, {label}", run))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.quality.cold_cache", description=__doc__)
    parser.add_argument("--turns", type=int, default=80)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--pause-every", type=int, default=6)
    parser.add_argument("--pause-s", type=float, default=900.0)
    parser.add_argument(
        "--budgets", type=lambda s: [int(b) for b in s.split(",") if b], default=[16_000, 32_000]
    )
    parser.add_argument(
        "--presets", type=lambda s: [p for p in s.split(",") if p], default=["default", "compact"]
    )
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
