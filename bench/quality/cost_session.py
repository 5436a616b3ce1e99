"""What a long agent session costs through ctxproxy, against a provider's prompt cache.

    python -m bench.quality.cost_session [--turns 40] [--windows auto,32000,16000] [--json]
        [--policies default] [--no-client-marks] [--cache-marks auto,keep,off]

The scripted 40-turn coding session of `tests/support/agent_session.py` (the real `anthropic`
SDK, two cache breakpoints per request as Claude Code places them, command outputs of 1.5 to 12
KB), once sent directly to the caching fake (`tests/support/fakes/caching.py`: Anthropic's
breakpoint rules, one token per 4 bytes of JSON) and once through a real ctxproxy app per policy
window (`extends: <policy>`, `budget.context_window`). Per run: the share of input tokens read
from the cache after turn 3, the input billed, and the cost at litellm's bundled prices of the
model (`claude-haiku-4-5`), as the fake reported it; for the proxied runs also the sum of the
proxy's `x-ctxproxy-cost-usd` (which must equal the fake's) and `x-ctxproxy-cost-unchanged-usd`
(its estimate of the session unchanged, beside the direct run's measured cost).

With `--no-client-marks` the client places no breakpoint at all (as many SDK users), and each
proxied run is repeated per `--cache-marks` mode (the policy's `cache_marks`: `auto` places the
proxy's own, `keep` and `off` leave the session uncached).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

import anthropic
from agent_session import MODEL, ScriptedModel, Session, run_session
from fakes.caching import CachingUpstream
from proxy_harness import make_settings, start_proxy

from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.prices import PriceTable, price_of
from proxy.tokens.usage import TokenUsage

TIMEOUTS = {"first_byte_s": 120, "idle_read_s": 120, "total_s": 300}


@dataclass
class Row:
    run: str
    cached_share_after_3: float
    input_tokens: int
    cache_read: int
    cache_write: int
    cost_usd: float
    proxy_cost_usd: float | None
    proxy_unchanged_usd: float | None


def session_cost(session: Session) -> float:
    prices = PriceTable([], ModelCatalog()).lookup("claude", MODEL)
    total = 0.0
    for turn in session.turns:
        usage = TokenUsage(turn.input, int(turn.reported["output_tokens"]), turn.cache_read,
                           turn.cache_write)  # fmt: skip
        total += price_of(usage, prices) or 0.0
    return total


def row(run: str, session: Session, proxied: bool) -> Row:
    return Row(
        run,
        round(session.cached_share(), 4),
        sum(t.input for t in session.turns),
        sum(t.cache_read for t in session.turns),
        sum(t.cache_write for t in session.turns),
        round(session_cost(session), 6),
        round(session.header_sum("x-ctxproxy-cost-usd"), 6) if proxied else None,
        round(session.header_sum("x-ctxproxy-cost-unchanged-usd"), 6) if proxied else None,
    )


async def direct(turns: int, marks: bool) -> Row:
    async with (
        CachingUpstream(script=ScriptedModel()) as fake,
        anthropic.AsyncAnthropic(base_url=fake.origin, api_key="sk-bench", max_retries=0) as sdk,
    ):
        session = await run_session(sdk, fake, turns, marks=marks)
    label = "direct (unchanged)" if marks else "direct (unchanged), no client marks"
    return row(label, session, proxied=False)


@dataclass(frozen=True)
class Variant:
    policy: str
    window: str
    cache_marks: str | None
    """The policy's `cache_marks` (None: the preset's)."""
    client_marks: bool
    extra: str = ""
    """More policy YAML (e.g. a `steps` list), appended to the generated policy."""


async def proxied(turns: int, variant: Variant, directory: Path) -> Row:
    name = f"bench-{variant.policy}-{variant.window}-{variant.cache_marks}"
    marks = f"cache_marks: {variant.cache_marks}\n" if variant.cache_marks else ""
    (directory / f"{name}.yaml").write_text(
        f"extends: {variant.policy}\nbudget: {{context_window: {variant.window}}}\n{marks}"
        + variant.extra
    )
    async with CachingUpstream(script=ScriptedModel()) as fake:
        upstream = {"name": "claude", "kind": "anthropic", "base_url": fake.origin,
                    "timeouts": TIMEOUTS}  # fmt: skip
        settings = make_settings(
            fake.origin,
            upstreams=[upstream],
            policies_dir=str(directory),
            tenants=[{"name": "default", "policy": name}],
        )
        proxy = await start_proxy(settings)
        try:
            async with anthropic.AsyncAnthropic(
                base_url=proxy.url, api_key="sk-bench", max_retries=0
            ) as sdk:
                session = await run_session(sdk, fake, turns, marks=variant.client_marks)
        finally:
            await proxy.stop()
    label = f"{variant.policy}, window {variant.window}"
    if variant.cache_marks:
        label += f", cache_marks {variant.cache_marks}"
    if not variant.client_marks:
        label += ", no client marks"
    return row(label, session, proxied=True)


async def measure(turns: int, variants: list[Variant], client_marks: bool) -> list[Row]:
    rows = [await direct(turns, client_marks)]
    with tempfile.TemporaryDirectory() as tmp:
        for variant in variants:
            rows.append(await proxied(turns, variant, Path(tmp)))
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| run | cached share after turn 3 | input tokens | cache read | cache write | cost "
        "(fake's usage) | proxy's cost header | proxy's unchanged estimate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        extra = [
            "-" if value is None else f"${value:.4f}"
            for value in (r.proxy_cost_usd, r.proxy_unchanged_usd)
        ]
        lines.append(
            f"| {r.run} | {r.cached_share_after_3:.1%} | {r.input_tokens:,} | {r.cache_read:,} "
            f"| {r.cache_write:,} | ${r.cost_usd:.4f} | {extra[0]} | {extra[1]} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--policies", default="default", help="comma-separated presets")
    parser.add_argument("--windows", default="auto,32000,16000", help="context windows")
    parser.add_argument(
        "--no-client-marks", action="store_true", help="the client places no cache breakpoint"
    )
    parser.add_argument(
        "--cache-marks", default="", help="cache_marks modes, comma-separated (default: preset)"
    )
    parser.add_argument("--json", action="store_true", help="rows as JSON lines")
    args = parser.parse_args(argv)
    client_marks = not args.no_client_marks
    variants = [
        Variant(policy, window, mode or None, client_marks)
        for policy in args.policies.split(",")
        for window in args.windows.split(",")
        for mode in args.cache_marks.split(",")
    ]
    rows = asyncio.run(measure(args.turns, variants, client_marks))
    if args.json:
        for r in rows:
            print(orjson.dumps(asdict(r)).decode())
    else:
        marks = "" if client_marks else ", the client placing no cache breakpoint"
        print(f"{args.turns}-turn anthropic SDK session, model {MODEL}{marks}\n")
        print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
