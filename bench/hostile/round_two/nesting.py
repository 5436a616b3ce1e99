"""Phase 2: bodies nested 250, 1,000 and 10,000 levels deep, on every route that parses one.

The nesting stands where an agent's history holds tool output: content blocks in a tool result
(each block holding the next), nested JSON in a call's arguments (a string, as the wire has it)
or in a `tool_use` input (an object), Responses input items holding items. Each body is one
turn of `conversation.history` with the nested value put in that spot, sent to the completion
route of its format, to the dry run `POST /v1/context/prepare` and, for Messages, to
`count_tokens`. Expected: 400 `invalid_json` (the proxy refuses nesting past its limit before
walking it) or a normal answer (nesting inside a JSON string is text); never a 5xx.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from fakes import FakeUpstream

from bench.common.ctxproxy_server import free_port
from bench.hostile.round_two.conversation import FORMATS, history
from bench.hostile.round_two.harness import send, served, write_config
from bench.hostile.round_two.upstream import pair_findings
from bench.hostile.round_two.verdict import PhaseResult

DEPTHS = (250, 1_000, 10_000)
KEY = "sk-round-two-nesting"
HOLE = "@@nested@@"


def nested(opening: str, leaf: str, closing: str, times: int) -> str:
    return opening * times + leaf + closing * times


def blocks(depth: int) -> str:
    """A content list `depth` levels deep: a tool_result block holding the next list."""
    opening = '[{"type":"tool_result","tool_use_id":"call_0","content":'
    return nested(opening, '"x"', "}]", depth // 2)


def json_object(depth: int) -> str:
    return nested('{"a":', "1", "}", depth)


def items(depth: int) -> str:
    """Responses input items `depth` levels deep: a message whose content is the next list."""
    return nested('[{"type":"message","role":"user","content":', '"hi"', "}]", depth // 2)


FILLERS = {
    "blocks": blocks,
    "object": json_object,
    "json text": lambda depth: json.dumps(json_object(depth)),
    "items": items,
}
SPOTS: tuple[tuple[str, str, tuple[str | int, ...], str], ...] = (
    ("chat", "content blocks in a tool result", ("messages", 3, "content"), "blocks"),
    ("chat", "nested JSON in arguments",
     ("messages", 2, "tool_calls", 0, "function", "arguments"), "json text"),
    ("responses", "content blocks in a call output", ("input", 2, "output"), "blocks"),
    ("responses", "nested JSON in arguments", ("input", 1, "arguments"), "json text"),
    ("responses", "nested input items", ("input",), "items"),
    ("messages", "content blocks in a tool_result",
     ("messages", 2, "content", 0, "content"), "blocks"),
    ("messages", "nested JSON in a tool_use input", ("messages", 1, "content", 0, "input"),
     "object"),
    ("messages", "nested JSON text in a tool_result",
     ("messages", 2, "content", 0, "content"), "json text"),
)  # fmt: skip
"""(format, what is nested, where in the body, the filler)."""


@dataclass(frozen=True)
class NestCase:
    shape: str
    path: str
    depth: int
    body: bytes


def nested_body(form: str, spot: tuple[str | int, ...], filler: str, depth: int) -> bytes:
    """One turn of history in `form`, `FILLERS[filler](depth)` put at `spot`."""
    body: Any = FORMATS[form].body(history(["ok"]))
    holder = body
    for key in spot[:-1]:
        holder = holder[key]
    holder[spot[-1]] = HOLE
    return json.dumps(body).replace(json.dumps(HOLE), FILLERS[filler](depth), 1).encode()


def routes(form: str) -> list[str]:
    found = [FORMATS[form].completion, FORMATS[form].dry_run]
    return found + (["/v1/messages/count_tokens"] if form == "messages" else [])


def nest_cases(depths: tuple[int, ...] = DEPTHS) -> Iterator[NestCase]:
    for depth in depths:
        for form, shape, spot, filler in SPOTS:
            body = nested_body(form, spot, filler, depth)
            for path in routes(form):
                yield NestCase(f"{form}: {shape}", path, depth, body)


def unexpected(label: str) -> bool:
    """Anything but 400 `invalid_json` or a normal answer."""
    return not (label.startswith("2") or label == "400 invalid_json")


async def run(args: argparse.Namespace, fake: FakeUpstream, tmp: Path) -> PhaseResult:
    result = PhaseResult("2 nesting")
    port = free_port()
    tenants = [{"name": "nest", "keys": [KEY], "policy": "default"}]
    config = write_config(tmp, port, fake, auth={"mode": "keys"}, tenants=tenants, policies={})
    start = len(fake.received)
    odd: collections.Counter[str] = collections.Counter()
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    gate = asyncio.Semaphore(args.concurrency)
    with served(args, result, config, port) as base:
        async with aiohttp.ClientSession() as session:

            async def one(case: NestCase) -> None:
                async with gate:
                    label = await send(session, result, "POST", base + case.path,
                                       data=case.body, headers=headers)  # fmt: skip
                if unexpected(label):
                    odd[f"{case.shape} x{case.depth} on {case.path}: {label}"] += 1

            cases = [c for _ in range(args.nesting_repeat) for c in nest_cases()]
            await asyncio.gather(*(one(case) for case in cases))
    result.bodies_checked, result.broken_pairs = pair_findings(fake.received[start:])
    figure = "; ".join(f"{k} x{n}" for k, n in odd.most_common(4)) or "none"
    result.check("answers other than 400 invalid_json or a normal one", figure, not odd)
    return result
