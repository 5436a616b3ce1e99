"""The round-two hostile run: every phase against a real `ctxproxy serve`, one table.

    python -m bench.hostile.round_two [--only compression,nesting,calibration,anonymous,injection]
        [--codings gzip,deflate,br] [--repeat 3] [--request-mib 1024] [--answer-mib 2048]
        [--answers 20] [--factor 3] [--sync-s 0.2] [--nesting-repeat 3] [--concurrency 4]
        [--ctxproxy PATH]

Phases (see bench/hostile/README.md), each with `/healthz` probed from another process for as
long as it runs and the proxy's 5xx counted:

1. compression: `compression.bomb_phases` (gzip, deflate and br request bombs without and with a
   key, answer bombs relayed and read), keys mode;
2. nesting: `nesting` (bodies 250 to 10,000 levels deep on every route that parses one);
3. calibration: `calibration.replicas` and `poison` (two replicas on one Redis, tenant a's
   upstream reporting inflated usage): tenant b's count ratio may move by at most one step;
4. anonymous: `anonymous` (passthrough and keys mode on Redis: keys written by requests that
   name no one);
5. injection: `injection` (injected markers in a summarized or dropped history).

Every body the fake upstreams receive in phases 1, 2, 4 and 5 is checked for broken tool pairs.
Prints the per-phase table and the checks; exits 1 when any target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from fakes import FakeUpstream

from bench.hostile import calibration, compression
from bench.hostile.round_two import anonymous, injection, nesting
from bench.hostile.round_two.harness import probed
from bench.hostile.round_two.upstream import answering, pair_findings
from bench.hostile.round_two.verdict import PhaseResult, exit_code, statuses_text, tables
from proxy.tokens.calibration_rule import MAX_STEP

EXPECTED = {  # what each compression sub-phase answers (compression.py's docstring)
    "req-unauth": "401 invalid_api_key", "req-healthz": "200", "req-auth": "413 request_too_large",
    "ans-relay": "200", "ans-read": "502 upstream_response_too_large",
}  # fmt: skip


async def compression_phase(args: argparse.Namespace) -> PhaseResult:
    result = PhaseResult("1 compression bombs")
    phases, received = await compression.bomb_phases(args, result.log_lines)
    odd = []
    for phase in phases:  # each sub-phase is probed by a prober of its own
        result.latencies += phase.latencies
        result.probes_failed += phase.probes_failed
        wanted = EXPECTED[phase.name.split()[0]]
        for label, n in phase.statuses.items():
            for _ in range(n):
                result.count(label, expected_5xx=label == EXPECTED["ans-read"])
            if label != wanted:
                odd.append(f"{phase.name}: {label} x{n}")
    print(f"\n{compression.HEADER}\n" + "\n".join(phase.row() for phase in phases))
    result.bodies_checked, result.broken_pairs = pair_findings(received)
    result.check("sub-phases answered as expected (401, 200, 413, 200, 502 too large)",
                 "; ".join(odd) or f"all {len(phases)}", not odd)  # fmt: skip
    return result


async def calibration_phase(args: argparse.Namespace) -> PhaseResult:
    result = PhaseResult("3 calibration poisoning")
    async with calibration.replicas(args, result.log_lines) as ports:
        with probed(result, *ports):
            measures, statuses = await calibration.poison(ports, args)
    for label, n in statuses.items():
        for _ in range(n):
            result.count(label)
    for m in measures:
        if m.tenant == "b":
            result.count(m.status)
    for replica in (1, 2):
        before, after = (
            [m for m in measures if (m.replica, m.tenant) == (replica, tenant)]
            for tenant in ("b", "a")
        )
        b0, b1 = before
        bound = b0.allowance * b0.count_ratio / (b0.count_ratio + MAX_STEP)
        figure = (f"{b0.allowance:,} -> {b1.allowance:,} (ratio {b0.count_ratio} -> "
                  f"{b1.count_ratio}); one step allows >= {bound:,.0f}")  # fmt: skip
        moved = abs(b1.count_ratio - b0.count_ratio)
        result.check(f"replica {replica}: b's allowance after a's {args.answers} inflated answers",
                     figure, moved <= MAX_STEP + 1e-9)  # fmt: skip
        a0, a1 = after
        result.check(f"replica {replica}: a's own allowance (the poisoning reached the proxy)",
                     f"{a0.allowance:,} -> {a1.allowance:,} (ratio {a1.count_ratio}, "
                     f"{a1.source})", a1.count_ratio > a0.count_ratio)  # fmt: skip
    result.notes.append(f"a's completions: {statuses_text(statuses)}")
    return result


Phase = Callable[[argparse.Namespace, FakeUpstream, Path], Awaitable[PhaseResult]]
PHASES: dict[str, Phase | None] = {
    "compression": None, "nesting": nesting.run, "calibration": None,
    "anonymous": anonymous.run, "injection": injection.run,
}  # fmt: skip
"""The phases in order; None: a phase that brings its own upstream."""


async def main_async(args: argparse.Namespace) -> list[PhaseResult]:
    results = []
    async with FakeUpstream(default=answering(injection.SUMMARY)) as fake:
        with tempfile.TemporaryDirectory(prefix="ctxproxy-round-two-") as tmp:
            for name in args.only.split(","):
                print(f"\n== {name}", flush=True)
                runner = PHASES[name]
                if name == "compression":
                    results.append(await compression_phase(args))
                elif name == "calibration":
                    results.append(await calibration_phase(args))
                elif runner is not None:
                    results.append(await runner(args, fake, Path(tmp)))
                fake.received.clear()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(PHASES), help="phases, comma-separated")
    compression.add_arguments(parser)
    calibration.add_arguments(parser)
    parser.set_defaults(answers=20)
    parser.add_argument("--nesting-repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--ctxproxy", default=None, help="the ctxproxy console script to run")
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    results = asyncio.run(main_async(args))
    print("\n" + tables(results))
    for result in results:
        for what, n in (result.broken_pairs + result.log_lines).items():
            print(f"- {result.name}: {what} x{n}")
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main())
