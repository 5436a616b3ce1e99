"""The latency a `find_tools` round adds (`python -m bench.tools.latency [--requests 50]`).

A real ctxproxy server (in-process) in front of the tests' fake OpenAI upstream, a chat request
with the 120 fixture tools under `defer_tools` (budget 2,000): the fake either answers at once
(`direct`) or first calls `find_tools` and answers the follow-up (`search round`). The difference
is what one search round adds on loopback: the search, the follow-up's preparation and one more
upstream call (a real model's own time for that call comes on top). Also the ranking alone, on
the 120 tools and on 10,000.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.tools.fixture import TOOLS_BY_FORMAT
from proxy.formats.tool_defs import chat_tool_entry
from proxy.synthetic.catalog import ToolCatalog

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

from fakes import FakeUpstream, completion
from proxy_harness import make_settings, start_proxy

POLICY = (
    "extends: default\nbudget: {context_window: 128000}\n"
    "steps: [{kind: defer_tools, budget: 2000}, {kind: drop_turns}]\n"
)
QUERY = "post a message to a slack channel"


def _search() -> Any:
    call = {"id": "call_find", "name": "find_tools", "arguments": json.dumps({"query": QUERY})}
    return completion(None, tool_calls=[call])


async def _timed(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> float:
    start = time.perf_counter()
    async with session.post(url, json=body, headers={"Authorization": "Bearer sk-b"}) as reply:
        await reply.read()
        assert reply.status == 200, reply.status
    return time.perf_counter() - start


async def run(requests: int) -> dict[str, list[float]]:
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Tell the team the deploy is done."}],
        "tools": TOOLS_BY_FORMAT["openai_chat"](120),
    }
    timings: dict[str, list[float]] = {"direct": [], "search round": []}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tools.yaml").write_text(POLICY)
        async with FakeUpstream() as fake:
            settings = make_settings(
                fake.base_url, policies_dir=tmp, tenants=[{"name": "default", "policy": "tools"}]
            )
            proxy = await start_proxy(settings)
            url = f"{proxy.base_url}/chat/completions"
            try:
                async with aiohttp.ClientSession() as session:
                    for i in range(requests * 2 + 4):  # the first 4: warm-up
                        direct = i % 2 == 0
                        fake.enqueue_many(*([] if direct else [_search()]), completion("ok"))
                        took = await _timed(session, url, body)
                        if i >= 4:
                            timings["direct" if direct else "search round"].append(took)
            finally:
                await proxy.stop()
    return timings


def ranking_ms(count: int, repeat: int = 20) -> float:
    tools = TOOLS_BY_FORMAT["openai_chat"](120)
    entries = [e for t in tools if (e := chat_tool_entry(t)) is not None]
    entries = [entries[i % len(entries)] for i in range(count)]
    start = time.perf_counter()
    for _ in range(repeat):
        ToolCatalog(tuple(entries)).ranked(QUERY, 3)  # a fresh catalog: its index built too
    return (time.perf_counter() - start) / repeat * 1000


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tools.latency")
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    timings = asyncio.run(run(args.requests))
    print("| request | n | p50 ms | p90 ms |\n|---|---:|---:|---:|")
    for name, values in timings.items():
        deciles = statistics.quantiles(values, n=10)
        print(f"| {name} | {len(values)} | {statistics.median(values) * 1000:.1f} | "
              f"{deciles[8] * 1000:.1f} |")
    added = statistics.median(timings["search round"]) - statistics.median(timings["direct"])
    print(f"\nadded by one search round (p50 difference): {added * 1000:.1f} ms")
    for count in (120, 10_000):
        print(f"ranking alone, {count} tools (index built + one query): {ranking_ms(count):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
