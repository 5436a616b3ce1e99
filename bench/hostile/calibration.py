"""Calibration poisoning: does one tenant's upstream, reporting inflated usage, shrink another
tenant's allowance, on either of two replicas?

    python -m bench.hostile.calibration [--answers 4] [--sync-s 0.2] [--factor 3]
                                        [--redis-url URL] [--ctxproxy PATH] [--proxy-path DIR]

Starts two `ctxproxy serve` processes (the console script next to this Python, or `--ctxproxy`;
`--proxy-path` is put first on their PYTHONPATH, to run another checkout's `proxy` package) on
one Redis (a key prefix of this run's own, deleted afterwards; `store.calibration_sync_s` is
`--sync-s`), auth mode `keys` with two tenants, `a` and `b`, each with its own upstream key and
the policy `calib` (window 8,000, reserved output 500: an allowance of 7,340 tokens). One fake
upstream, run by this script, answers every chat completion with `usage.prompt_tokens` equal to
the prompt's gpt-4o count, times `--factor` for tenant `a`'s key. Tenant `a` sends `--answers`
completions of about 1,000 tokens to replica 1; after a few sync intervals, tenant `b`'s
allowance (dry run) and a 4,845-token request of `b` (a status: 200, or 400 with its code; its
dry run before, so that `b` feeds no sample of its own, the completion after) are measured on
both replicas, before and after; so is `a`'s own allowance.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

import aiohttp
from fakes import FakeUpstream, Recorded, Reply, completion, make_usage
from fakes.defaults import default_for

from bench.common.ctxproxy_server import free_port
from bench.hostile.server import delete_prefix, running_proxy
from proxy.tokens.counters import TokenCounters

CHAT = "/v1/chat/completions"
POLICY = "extends: default\nbudget: {context_window: 8000, reserved_output: 500}\n"
KEYS = {"a": "sk-bench-calib-a", "b": "sk-bench-calib-b"}
UPSTREAM_KEYS = {"a": "sk-up-calib-a", "b": "sk-up-calib-b"}
PROBE_TOKENS = 4845
ANSWER_TOKENS = 1000


def proxy_config(port: int, upstream: str, redis_url: str, prefix: str, sync_s: float,
                 tmp: Path) -> Path:  # fmt: skip
    (tmp / "calib.yaml").write_text(POLICY)
    config = {
        "server": {"host": "127.0.0.1", "port": port, "log_level": "WARNING", "log_format": "text"},
        "store": {"kind": "redis", "url": redis_url, "key_prefix": prefix,
                  "secret": "calibration-run", "calibration_sync_s": sync_s},
        "upstreams": [{"name": "fake", "base_url": upstream}],
        "auth": {"mode": "keys"},
        "tenants": [{"name": n, "keys": [KEYS[n]], "policy": "calib",
                     "upstream_key": UPSTREAM_KEYS[n]} for n in KEYS],
        "policies_dir": str(tmp),
    }  # fmt: skip
    path = tmp / f"replica-{port}.json"
    path.write_text(json.dumps(config))
    return path


def inflating(factor: float) -> Any:
    """The fake upstream's answers: exact usage, times `factor` for tenant a's upstream key."""
    counter = TokenCounters().for_model("gpt-4o")

    def reply(record: Recorded) -> Reply:
        if record.path != CHAT:
            return default_for(record)
        tokens = counter.count_request(record.json())
        if record.headers.get("Authorization") == f"Bearer {UPSTREAM_KEYS['a']}":
            tokens = round(tokens * factor)
        return completion("ok", usage=make_usage(tokens, 1))

    return reply


def prompt(tokens: int) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": "lorem " * (tokens - 8)}]}


async def dry_run(session: aiohttp.ClientSession, port: int, tenant: str) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}/v1/context/prepare"
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"}
    async with session.post(url, json=prompt(600), headers=headers) as response:
        manifest: dict[str, Any] = (await response.json())["manifest"]
    return manifest


async def complete(
    session: aiohttp.ClientSession, port: int, tenant: str, tokens: int, *, dry: bool = False
) -> str:
    """The status of a completion of about `tokens` tokens (`dry`: of its dry run, which is
    refused exactly when the completion would be, without any upstream call)."""
    route = "context/prepare" if dry else "chat/completions"
    url = f"http://127.0.0.1:{port}/v1/{route}"
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"}
    async with session.post(url, json=prompt(tokens), headers=headers) as response:
        body = await response.json()
    code = body.get("error", {}).get("code") if response.status != 200 else None
    return f"{response.status}" + (f" {code}" if code else "")


@dataclass(frozen=True)
class Measure:
    """One tenant's allowance on one replica at one moment (`status`: of b's probe request)."""

    moment: str
    replica: int
    tenant: str
    allowance: int
    count_ratio: float
    source: str
    status: str

    def row(self) -> str:
        return (
            f"| {self.moment} | {self.replica} | {self.tenant} | {self.allowance:,} | "
            f"{self.count_ratio} | {self.source} | {self.status} |"
        )


def measured(
    moment: str, replica: int, tenant: str, manifest: dict[str, Any], status: str
) -> Measure:
    source = manifest.get("count_ratio_source", "-")  # an older proxy does not say
    return Measure(moment, replica, tenant, manifest["allowance"], manifest["count_ratio"],
                   source, status)  # fmt: skip


async def measure(
    session: aiohttp.ClientSession, ports: list[int], moment: str, *, dry: bool
) -> list[Measure]:
    measures = []
    for replica, port in enumerate(ports, 1):
        status = await complete(session, port, "b", PROBE_TOKENS, dry=dry)
        measures.append(measured(moment, replica, "b", await dry_run(session, port, "b"), status))
        measures.append(measured(moment, replica, "a", await dry_run(session, port, "a"), "-"))
    return measures


HEADER = (
    "| moment | replica | tenant | allowance | count_ratio | source | "
    f"b's {PROBE_TOKENS:,}-token request (before: its dry run; after: the completion) |\n"
    "|---|---|---|---|---|---|---|"
)


@asynccontextmanager
async def replicas(
    args: argparse.Namespace, log_lines: collections.Counter[str]
) -> AsyncIterator[list[int]]:
    """The ports of two proxies on one Redis (a key prefix of their own, deleted afterwards) in
    front of the inflating upstream."""
    prefix = f"ctxproxy-bench-calib:{uuid.uuid4().hex[:12]}:"
    try:
        async with FakeUpstream(default=inflating(args.factor)) as upstream:
            with tempfile.TemporaryDirectory(prefix="ctxproxy-calibration-") as tmp:
                ports = [free_port(), free_port()]
                where = (upstream.base_url, args.redis_url, prefix, args.sync_s, Path(tmp))
                configs = [proxy_config(p, *where) for p in ports]
                with (
                    running_proxy(args.ctxproxy, configs[0], ports[0], log_lines),
                    running_proxy(args.ctxproxy, configs[1], ports[1], log_lines),
                ):
                    yield ports
    finally:
        delete_prefix(prefix, args.redis_url)


async def main_async(args: argparse.Namespace) -> int:
    if args.proxy_path:
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (args.proxy_path, os.environ.get("PYTHONPATH", "")) if p
        )
    log_lines: collections.Counter[str] = collections.Counter()
    async with replicas(args, log_lines) as ports:
        measures, _ = await poison(ports, args)
    print(f"\n{HEADER}\n" + "\n".join(m.row() for m in measures))
    problems = ", ".join(f"{k} x{v}" for k, v in log_lines.items()) or "none"
    print(f"\nproxy log: {problems}")
    return 0


async def poison(
    ports: list[int], args: argparse.Namespace
) -> tuple[list[Measure], collections.Counter[str]]:
    """b measured, a's inflated answers on replica 1, b measured again: (the measures, the
    statuses of a's completions)."""
    async with aiohttp.ClientSession() as session:
        measures = await measure(session, ports, "before", dry=True)  # no sample of b's
        statuses = collections.Counter(
            [await complete(session, ports[0], "a", ANSWER_TOKENS) for _ in range(args.answers)]
        )
        print(f"a's {args.answers} completions on replica 1 ({args.factor}x usage): "
              f"{statuses}", flush=True)  # fmt: skip
        await asyncio.sleep(4 * args.sync_s + 0.5)  # both replicas sync a few times
        measures += await measure(session, ports, f"after {args.answers} answers", dry=False)
    return measures, statuses


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The poisoning's options (`bench.hostile.round_two` takes them too)."""
    parser.add_argument("--answers", type=int, default=4)
    parser.add_argument("--factor", type=float, default=3.0)
    parser.add_argument("--sync-s", type=float, default=0.2)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--ctxproxy", default=None, help="the ctxproxy console script to run")
    parser.add_argument("--proxy-path", default=None, help="a checkout whose proxy package runs")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
