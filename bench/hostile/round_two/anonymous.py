"""Phase 4: anonymous writes. Does a request that names no one leave anything in Redis?

Two proxies on Redis (127.0.0.1:6379, a key prefix each, deleted afterwards), policy `compact`
with a small window (offload, clear, summarize: every step would store): one in `passthrough`
mode, one in `keys` mode. Each gets, in every format, on the completion route (JSON and
streamed), the dry run and (Messages) count_tokens, a history with one large tool result (it
fits unreduced) and one with eight (it must be reduced), each with fresh words. The keys under
the proxy's prefix are counted before and after each group of credentials:

- passthrough, no credential (none, empty values, bare schemes): 0 keys written (target);
- passthrough, made-up tokens (the fake upstream refuses them with 401): counted, not a target
  (in passthrough any credential names a scope of its own; only the upstream can refuse it);
- keys mode, no credential or made-up proxy keys (all refused with 401): 0 keys (target);
- a real credential afterwards, in both modes: keys written (target: more than 0, so that the
  zeros above are the proxy's doing, not a store that writes nothing).
"""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from fakes import FakeUpstream

from bench.common.ctxproxy_server import free_port
from bench.hostile.cases import fresh_words
from bench.hostile.round_two.conversation import FORMATS, history
from bench.hostile.round_two.harness import count_keys, send, served, write_config
from bench.hostile.round_two.upstream import MADE_UP, pair_findings
from bench.hostile.round_two.verdict import PhaseResult
from bench.hostile.server import delete_prefix

POLICY = """extends: default
mode: compact
budget: {context_window: 16000, reserved_output: 1000}
steps:
  - {kind: offload_tool_results, threshold_chars: 2000}
  - {kind: clear_tool_results}
  - {kind: summarize, keep_recent_turns: 1}
"""
NO_CREDENTIAL: tuple[dict[str, str], ...] = (
    {}, {"Authorization": ""}, {"Authorization": "Bearer "}, {"Authorization": "Bearer"},
    {"Authorization": "Basic"}, {"Authorization": "Token  "}, {"x-api-key": ""}, {"api-key": ""},
)  # fmt: skip
MADE_UP_TOKENS: tuple[dict[str, str], ...] = (
    {"Authorization": f"Bearer sk-{MADE_UP}-1"}, {"x-api-key": f"sk-{MADE_UP}-2"},
    {"api-key": f"{MADE_UP}-3"}, {"Authorization": f"Bearer {MADE_UP}-{'x' * 200}"},
)  # fmt: skip
KEY = "sk-round-two-anonymous"
CLIENT = {"Authorization": "Bearer sk-round-two-client"}


def requests(credentials: dict[str, str]) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    """(path, body, headers) of every route and format, both sizes, fresh words each."""
    found = []
    for form, routes in FORMATS.items():
        extra = {"anthropic-version": "2023-06-01"} if form == "messages" else {}
        for results in (1, 8):
            body = routes.body(history([fresh_words(12_000) for _ in range(results)]))
            paths = [routes.completion, routes.dry_run]
            paths += ["/v1/messages/count_tokens"] if form == "messages" else []
            found += [(path, body, {**credentials, **extra}) for path in paths]
            found.append((routes.completion, {**body, "stream": True}, {**credentials, **extra}))
    return found


async def sweep(
    session: aiohttp.ClientSession, result: PhaseResult, base: str,
    credentials: tuple[dict[str, str], ...], prefix: str,
) -> tuple[int, int]:  # fmt: skip
    """(requests sent, keys written meanwhile) for every credential of `credentials`."""
    before, sent = count_keys(prefix), 0
    for headers in credentials:
        for path, body, with_headers in requests(headers):
            await send(session, result, "POST", base + path, json=body, headers=with_headers)
            sent += 1
    return sent, count_keys(prefix) - before


async def one_proxy(
    args: argparse.Namespace, result: PhaseResult, config: Path, port: int, prefix: str,
    groups: list[tuple[str, tuple[dict[str, str], ...]]],
) -> dict[str, tuple[int, int]]:  # fmt: skip
    """(requests, keys written) per group of credentials, in order, on one proxy."""
    written = {}
    try:
        with served(args, result, config, port) as base:
            async with aiohttp.ClientSession() as session:
                for name, credentials in groups:
                    written[name] = await sweep(session, result, base, credentials, prefix)
    finally:
        delete_prefix(prefix)
    return written


async def run(args: argparse.Namespace, fake: FakeUpstream, tmp: Path) -> PhaseResult:
    result = PhaseResult("4 anonymous writes")
    start = len(fake.received)
    port, prefix = free_port(), f"ctxproxy-round-two-{uuid.uuid4().hex[:12]}:"
    config = write_config(tmp, port, fake, prefix=prefix, policies={"small": POLICY},
                          auth={"mode": "passthrough", "passthrough_tenant": "open"},
                          tenants=[{"name": "open", "policy": "small"}])  # fmt: skip
    passthrough = await one_proxy(args, result, config, port, prefix, [
        ("none", NO_CREDENTIAL), ("made up", MADE_UP_TOKENS), ("real", (CLIENT,))])  # fmt: skip
    port, prefix = free_port(), f"ctxproxy-round-two-{uuid.uuid4().hex[:12]}:"
    tenants = [{"name": "closed", "keys": [KEY], "policy": "small"}]
    config = write_config(tmp, port, fake, prefix=prefix, policies={"small": POLICY},
                          auth={"mode": "keys"}, tenants=tenants)  # fmt: skip
    keys = await one_proxy(args, result, config, port, prefix, [
        ("refused", NO_CREDENTIAL + MADE_UP_TOKENS),
        ("real", ({"Authorization": f"Bearer {KEY}"},))])  # fmt: skip
    result.bodies_checked, result.broken_pairs = pair_findings(fake.received[start:])
    judge(result, passthrough, keys)
    return result


def judge(
    result: PhaseResult, passthrough: dict[str, tuple[int, int]], keys: dict[str, tuple[int, int]]
) -> None:
    def figure(sent_written: tuple[int, int]) -> str:
        return f"{sent_written[1]} keys after {sent_written[0]} requests"

    result.check("passthrough, no credential: keys written", figure(passthrough["none"]),
                 passthrough["none"][1] == 0)  # fmt: skip
    result.check("keys mode, no or made-up proxy key (401): keys written", figure(keys["refused"]),
                 keys["refused"][1] == 0)  # fmt: skip
    for mode, written in (("passthrough", passthrough), ("keys mode", keys)):
        result.check(f"{mode}, a real credential after them: keys written (> 0)",
                     figure(written["real"]), written["real"][1] > 0)  # fmt: skip
    result.notes.append(
        f"passthrough, made-up tokens the upstream refuses with 401: "
        f"{figure(passthrough['made up'])} (in passthrough any credential names a scope; the "
        "proxy cannot tell a made-up token from a real one)"
    )
