"""What the round-two phases share: a proxy's config, the proxy run under `/healthz` probes from
another process, counted requests and the Redis keys under a prefix."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
from fakes import FakeUpstream

from bench.hostile import compression
from bench.hostile.round_two.verdict import PhaseResult
from bench.hostile.server import running_proxy

SECRET = "round-two"
REDIS_URL = "redis://127.0.0.1:6379/0"
TIMEOUT_S = 120.0
"""A request's deadline (the client's)."""
TIMEOUTS = {"first_byte_s": 30, "idle_read_s": 30, "total_s": 120}


def write_config(
    tmp: Path, port: int, upstream: FakeUpstream, *, auth: dict[str, Any],
    tenants: list[dict[str, Any]], policies: dict[str, str], prefix: str | None = None,
) -> Path:  # fmt: skip
    """A proxy on `port` in front of `upstream` (OpenAI on `/v1`, Anthropic for `claude-*`), the
    store in memory or, with `prefix`, in Redis under it."""
    folder = tmp / f"policies-{port}"
    folder.mkdir()
    for name, text in policies.items():
        (folder / f"{name}.yaml").write_text(text)
    store: dict[str, Any] = {"kind": "memory", "secret": SECRET}
    if prefix is not None:
        store |= {"kind": "redis", "url": REDIS_URL, "key_prefix": prefix}
    config = {
        "server": {"host": "127.0.0.1", "port": port, "log_level": "WARNING", "log_format": "text"},
        "store": store,
        "upstreams": [
            {"name": "fake", "base_url": upstream.base_url, "timeouts": TIMEOUTS},
            {"name": "claude", "kind": "anthropic", "base_url": upstream.origin,
             "timeouts": TIMEOUTS},
        ],
        "routes": [{"model": "claude-*", "upstream": "claude"}],
        "auth": auth, "tenants": tenants, "policies_dir": str(folder),
    }  # fmt: skip
    path = tmp / f"proxy-{port}.json"
    path.write_text(json.dumps(config))
    return path


@contextmanager
def probed(result: PhaseResult, *ports: int) -> Iterator[None]:
    """`/healthz` of each port probed from a process of its own for as long as this lasts."""
    with ExitStack() as stack:
        outs = [stack.enter_context(compression.probing(port)) for port in ports]
        yield
    for out in outs:
        for latencies, failures in out:
            result.latencies += latencies
            result.probes_failed += failures


@contextmanager
def served(args: argparse.Namespace, result: PhaseResult, config: Path, port: int) -> Iterator[str]:
    """`ctxproxy serve` on `config`, probed throughout (its log's lines go to `result`); its base
    URL."""
    with running_proxy(args.ctxproxy, config, port, result.log_lines), probed(result, port):
        yield f"http://127.0.0.1:{port}"


async def send(
    session: aiohttp.ClientSession, result: PhaseResult, method: str, url: str, **kwargs: Any
) -> str:
    """One request, counted in `result`; its label ("400 invalid_json", "timeout", ...)."""
    label, _ = await compression.send(session, method, url, TIMEOUT_S, **kwargs)
    result.count(label)
    return label



def count_keys(prefix: str) -> int:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        return sum(1 for _ in client.scan_iter(match=f"{prefix}*", count=1000))
    finally:
        client.close()
