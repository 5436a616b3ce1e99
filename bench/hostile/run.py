"""Hostile-input run (issue 11): thousands of generated requests through a real ctxproxy server.

    python -m bench.hostile.run [--requests 5000] [--seed 11] [--concurrency 4] [--redis]
                                [--phases passthrough,keys] [--scale 1] [--ctxproxy PATH]
                                [--formats chat,responses] [--examples DIR]

Starts `ctxproxy serve` (the console script next to this Python) on a free loopback port, one
phase at a time, in front of the tests' fake OpenAI upstream (`tests/support/fakes`) run by this
script on loopback and scripted per request (`bench/hostile/upstream.py`). Memory store by default;
`--redis` uses 127.0.0.1:6379 under a unique key prefix, deleted afterwards.

Phases: `passthrough` (the client's credentials name its scope: Bearer, x-api-key, api-key, Basic,
anonymous and mixes rotate; every request gets the small-window policy `tiny`) and `keys` (three
tenants: `tiny`, `reject` = tiny + `on_invalid: reject`, and the bundled `default`; one request in
twenty presents a wrong or non-Bearer credential). `tiny` has a 2,500-token window, so offload,
clear and drop really happen and the read rounds run.

Requests (`bench/hostile/cases.py`): the issue's attack cases (huge tool results, 100,000 tiny
messages, the pathological search, a client tool named `read_context_artifact`, synthetic calls
with missing/null/empty/duplicate ids, `n=2`, `"stream": 1`, upstream failures on purpose, the
passthrough route), artifact reads with hostile `offset`/`max_chars` (4,300 digits ...) from the
owner's and from foreign credentials, then fuzz from `tests/support/hostile.py` (hypothesis, seeded,
no shrinking, no database) until `--requests` is reached.

Counted: every answer's status; **proxy 5xx** = any 500, and any other 5xx except a 502/503/504
answering an upstream failure made on purpose; SSE error events; requests without an answer; what
the case itself checks (e.g. a foreign credential reading an artifact). Every body the upstream
receives (the client's round and every synthetic round) is checked for tool pairs
(`cases.pair_problems`). **Broken pairs upstream** counts bodies with a problem whose
client request had sound pairs; a request broken on arrival may be forwarded untouched
(`on_invalid: forward`), which is not the proxy's doing: those are counted apart, untouched or not.
The server's log (WARNING and up) is scanned for `Traceback` and `ERROR` lines.

`--formats` (default `chat`, the run above): with `responses`, each phase also sends the
`/v1/responses` cases of `bench/hostile/responses.py` (attack cases, two-turn conversations,
fuzz from `tests/support/hostile_responses.py`) to the scripted Responses upstream
(`bench/hostile/upstream_responses.py`); every body it receives is checked for call/output pairs
and reasoning items (`responses.body_problems`), every answer the client gets for its
envelope, event numbering and leaks (`answers.answer_problem`, counted as case
findings). `--examples DIR` writes the bodies of the first case of each finding.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

import aiohttp
from fakes import FakeUpstream

from bench.common.ctxproxy_server import free_port
from bench.hostile.answers import answer_problem
from bench.hostile.cases import (
    PREPARE,
    Case,
    attack_cases,
    body_problems,
    exchange,
    fuzz_cases,
)
from bench.hostile.report import (
    Tally,
    error_code,
    print_table,
    stream_error_codes,
    write_examples,
)
from bench.hostile.responses import (
    Integrity,
    responses_attack_cases,
    responses_case,
    responses_fuzz_cases,
)
from bench.hostile.responses import body_problems as responses_body_problems
from bench.hostile.server import KEYS, delete_prefix, proxy_config, running_proxy
from bench.hostile.upstream import FAULTS, scripted
from bench.hostile.upstream_base import REQUEST_HEADER, SCRIPT_HEADER
from bench.hostile.upstream_responses import RESPONSES_FAULTS

PASSTHROUGH_CREDENTIALS: tuple[dict[str, str], ...] = (
    {"Authorization": "Bearer sk-client-a"}, {"Authorization": "Bearer sk-client-b"},
    {"x-api-key": "xk-client-c"}, {"api-key": "ak-client-d"},
    {"Authorization": "Basic dXNlcjpwYXNz"}, {}, {"Authorization": "Bearer "},
    {"Authorization": "Bearer sk-client-a", "x-api-key": "xk-client-c"},
)  # fmt: skip
WRONG_CREDENTIALS: tuple[dict[str, str], ...] = (  # x-api-key is a proxy key too (main, Anthropic)
    {"x-api-key": "xk-wrong"}, {"Authorization": "Basic dXNlcjpwYXNz"}, {},
    {"Authorization": "Bearer sk-wrong"},
)  # fmt: skip
HOSTILE_OFFSETS = (
    "9" * 4300, "1" * 4301, "9" * 10_000, "-1", "1e3", "abc", "", "0", "5", " 5", "%00", "0x10",
    "\uff11\uff12", "\u00b2", "99999999999999999999", "1.5",
)  # fmt: skip
BATCH = 64
ON_PURPOSE = frozenset(FAULTS) | RESPONSES_FAULTS
TIMEOUT = aiohttp.ClientTimeout(total=180)
ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")


@dataclass
class Sent:
    case: Case
    original: bytes | None
    upstream_bodies: int = 0
    integrity: Integrity | None = None
    """The reasoning items of a Responses request (the client's and the upstream's)."""


class Phase:
    """One proxy in front of the scripted fake upstream; sends cases, tallies what happens."""

    def __init__(self, name: str, fake: FakeUpstream, port: int, tally: Tally) -> None:
        self.name = name
        self.fake = fake
        self.port = port
        self.tally = tally
        self.sent: dict[int, Sent] = {}
        self.number = 0

    def headers_for(self, number: int) -> dict[str, str]:
        if self.name == "passthrough":
            return dict(PASSTHROUGH_CREDENTIALS[number % len(PASSTHROUGH_CREDENTIALS)])
        if number % 20 == 7:
            return dict(WRONG_CREDENTIALS[number // 20 % len(WRONG_CREDENTIALS)])
        return {"Authorization": f"Bearer {list(KEYS.values())[number % len(KEYS)]}"}

    def on_output(self, number: int, items: list[Any]) -> None:
        sent = self.sent.get(number)
        if sent is not None and sent.integrity is not None:
            sent.integrity.add(items)

    def on_body(self, number: int, path: str, raw: bytes) -> None:
        sent = self.sent.get(number)
        if sent is None:
            return
        if path.endswith("/responses") and sent.integrity is not None:
            problems = responses_body_problems(raw, sent.integrity)
        elif path.endswith("/chat/completions") and sent.case.kind == "chat":
            problems = body_problems(raw)
        else:
            return
        self.tally.upstream_bodies += 1
        sent.upstream_bodies += 1
        category = sent.case.category
        if sent.case.well_formed:
            if problems is None or problems:
                what = f"not a {sent.case.kind} body" if problems is None else problems[0]
                self.tally.broken_pairs[f"{category}: {what}"] += 1
                self.tally.examples.setdefault(f"{category}: {what}", (sent.original, raw))
        elif problems != []:
            untouched = "untouched" if raw == sent.original else "changed"
            self.tally.arrived_broken[untouched] += 1
            self.tally.examples.setdefault(f"arrived broken, {untouched}", (sent.original, raw))

    async def send(
        self, session: aiohttp.ClientSession, case: Case, integrity: Integrity | None = None
    ) -> None:
        """Send `case` (a next turn: with the first turn's reasoning items, `integrity`)."""
        self.number += 1
        number = self.number
        if case.kind == "responses":
            integrity = integrity or Integrity(None)
            integrity.add_body(case.body)
        self.sent[number] = Sent(case, case.body, integrity=integrity)
        credentials = case.credentials
        if credentials is None:
            credentials = self.headers_for(number)
        headers = {**credentials, REQUEST_HEADER: str(number), SCRIPT_HEADER: case.script}
        if case.body is not None:
            headers["Content-Type"] = "application/json"
        category = f"{self.name}: {case.category}"
        self.tally.requests[category] += 1
        url = f"http://127.0.0.1:{self.port}{case.path}"
        started = time.monotonic()
        try:
            async with session.request(case.method, url, data=case.body, headers=headers) as r:
                if case.hang_up:
                    await r.content.readany()
                    r.close()
                    return
                status, answer = r.status, await r.read()
                streamed = r.headers.get("Content-Type", "").startswith("text/event-stream")
                actions = r.headers.get("x-ctxproxy-actions", "none")
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.tally.no_answer[f"{category}: {type(exc).__name__}"] += 1
            return
        finally:
            self.tally.seconds[category] += time.monotonic() - started
            sent = self.sent.pop(number)
        self.tally.with_rounds += sent.upstream_bodies > 1
        for action in actions.split(","):
            self.tally.actions[action.split(":")[0]] += 1
        self.judge(case, category, status, answer, streamed)
        after = case.follow_up(case.body or b"", answer, streamed) if case.follow_up else None
        if after is not None and status == 200:
            turn = responses_case(f"{case.category[10:]} (next turn)", after, script=case.script)
            await self.send(session, turn, sent.integrity)

    def judge(self, case: Case, category: str, status: int, answer: bytes, streamed: bool) -> None:
        self.tally.statuses[status] += 1
        if status >= 500:
            if case.script in ON_PURPOSE and status in (502, 503, 504):
                self.tally.expected_5xx += 1
            else:
                self.tally.proxy_5xx[f"{category}: {status} {error_code(answer)}"] += 1
        if streamed:
            why = " (upstream failed on purpose)" if case.script in ON_PURPOSE else ""
            for code in stream_error_codes(answer):
                self.tally.stream_errors[f"{code}{why}"] += 1
        if status >= 400:
            sound = "sound" if case.well_formed else "broken"
            self.tally.error_codes[f"{case.kind} {status} {error_code(answer)} ({sound})"] += 1
            self.tally.examples.setdefault(f"{case.kind} {status} {error_code(answer)} ({sound})",
                                           (case.body, answer))  # fmt: skip
        findings = [case.check(status, answer)] if case.check is not None else []
        if case.kind == "responses":
            odd = case.script == "odd" or (case.script == "r_eof" and not streamed)
            findings.append(answer_problem(status, answer, streamed, case.path, odd))
        for finding in findings:
            if finding:
                self.tally.findings[f"{category}: {finding}"] += 1
                self.tally.examples.setdefault(f"{category}: {finding}", (case.body, answer))

    async def send_all(self, cases: list[Case], concurrency: int) -> None:
        semaphore = asyncio.Semaphore(concurrency)

        async def one(session: aiohttp.ClientSession, case: Case) -> None:
            async with semaphore:
                await self.send(session, case)

        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            await asyncio.gather(*(one(session, c) for c in cases))
        self.fake.received.clear()


# -- artifacts read with hostile queries, by their owner and by others ------------------------


def owner_and_others(phase: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Who stores the artifact, and credentials of other scopes (or no tenant at all)."""
    if phase == "passthrough":
        owner = PASSTHROUGH_CREDENTIALS[0]
        return owner, [c for c in PASSTHROUGH_CREDENTIALS if c != owner]
    owner = {"Authorization": f"Bearer {KEYS['tiny']}"}
    others = [{"Authorization": f"Bearer {KEYS[n]}"} for n in ("reject", "default")]
    return owner, others + list(WRONG_CREDENTIALS)


async def artifact_cases(phase: Phase, count: int) -> list[Case]:
    """GET /v1/context/artifacts/{id} with hostile offset/max_chars, by the owner and by others;
    the id is stored first by a dry run of the owner."""
    owner, others = owner_and_others(phase.name)
    body = json.dumps(exchange("y" * 20_000)).encode()
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        url = f"http://127.0.0.1:{phase.port}{PREPARE}"
        headers = {**owner, "Content-Type": "application/json"}
        async with session.post(url, data=body, headers=headers) as response:
            found = ARTIFACT_ID.findall((await response.read()).decode())
    phase.tally.requests[f"{phase.name}: dry run storing the artifact read below"] += 1
    phase.tally.statuses[response.status] += 1
    if not found:
        raise SystemExit(f"{phase.name}: the dry run stored no artifact")
    cases = []
    for k in range(count):
        offset = HOSTILE_OFFSETS[k % len(HOSTILE_OFFSETS)]
        max_chars = HOSTILE_OFFSETS[k // 3 % len(HOSTILE_OFFSETS)]
        path = f"/v1/context/artifacts/{found[0]}?offset={offset}&max_chars={max_chars}"
        case = Case("GET artifact, hostile offset/max_chars", path, method="GET",
                    credentials=dict(owner))  # fmt: skip
        if k % 2:  # a sound query, so that only the scope decides
            case.category = "GET artifact with another credential"
            case.path = f"/v1/context/artifacts/{found[0]}" + ("?offset=0" if k % 4 == 1 else "")
            case.credentials = dict(others[k // 2 % len(others)])
            case.check = foreign_read
        cases.append(case)
    return cases


def foreign_read(status: int, answer: bytes) -> str | None:
    """Another scope reads "not found" (404), a non-tenant is refused (401)."""
    return None if status in (401, 404) else f"another credential's read answered {status}"


# -- the run ----------------------------------------------------------------------------------


def run_phase(name: str, args: argparse.Namespace, fuzz: int, tally: Tally) -> None:
    loop = asyncio.new_event_loop()
    phase_holder: list[Phase] = []
    fake = FakeUpstream(default=scripted(
        lambda n, p, b: phase_holder[0].on_body(n, p, b),
        lambda n, items: phase_holder[0].on_output(n, items),
    ))  # fmt: skip
    loop.run_until_complete(fake.start())
    prefix = f"ctxproxy-hostile-{uuid.uuid4().hex[:12]}:" if args.redis else None
    try:
        with tempfile.TemporaryDirectory(prefix="ctxproxy-hostile-") as tmp:
            port = free_port()
            config = proxy_config(name, port, fake.base_url, prefix, Path(tmp))
            with running_proxy(args.ctxproxy, config, port, tally.log_lines):
                phase = Phase(name, fake, port, tally)
                phase_holder.append(phase)
                send_everything(loop, phase, args, fuzz)
    finally:
        loop.run_until_complete(fake.stop())
        loop.close()
        if prefix is not None:
            print(f"{name}: deleted {delete_prefix(prefix)} Redis keys under {prefix}")


def send_everything(
    loop: asyncio.AbstractEventLoop, phase: Phase, args: argparse.Namespace, fuzz: int
) -> None:
    started = time.monotonic()
    formats = args.formats.split(",")
    cases = list(attack_cases(args.scale)) if "chat" in formats else []
    if "responses" in formats:
        cases += responses_attack_cases(args.scale)
    heavy = [c for c in cases if c.heavy]
    loop.run_until_complete(phase.send_all(heavy, 1))
    light = [c for c in cases if not c.heavy]
    if "chat" in formats:
        light += loop.run_until_complete(artifact_cases(phase, 50 * args.scale))
    for start in range(0, len(light), BATCH):
        loop.run_until_complete(phase.send_all(light[start : start + BATCH], args.concurrency))
    buffer: list[Case] = []

    def sink(case: Case) -> None:
        buffer.append(case)
        if len(buffer) >= BATCH:
            loop.run_until_complete(phase.send_all(buffer[:], args.concurrency))
            buffer.clear()

    if "chat" in formats:
        fuzz_cases(fuzz // len(formats), args.seed, sink)
    if "responses" in formats:
        responses_fuzz_cases(fuzz // len(formats), args.seed, sink)
    loop.run_until_complete(phase.send_all(buffer, args.concurrency))
    print(f"{phase.name}: {phase.number} requests in {time.monotonic() - started:.0f} s",
          flush=True)  # fmt: skip


def attacks_per_phase(scale: int, formats: list[str]) -> int:
    chat = len(list(attack_cases(scale))) + 50 * scale + 1 if "chat" in formats else 0
    return chat + (len(list(responses_attack_cases(scale))) if "responses" in formats else 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=5000, help="at least this many in all")
    parser.add_argument("--seed", type=int, default=11, help="hypothesis seed of the fuzz")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--scale", type=int, default=1, help="multiplies the light attack cases")
    parser.add_argument("--phases", default="passthrough,keys")
    parser.add_argument("--formats", default="chat", help="chat, responses or chat,responses")
    parser.add_argument("--redis", action="store_true", help="store in 127.0.0.1:6379")
    parser.add_argument("--examples", help="a folder for the bodies of each broken pair found")
    parser.add_argument("--ctxproxy", help="the ctxproxy console script (default: next to python)")
    args = parser.parse_args(argv)
    phases = args.phases.split(",")
    attacks = attacks_per_phase(args.scale, args.formats.split(","))
    fuzz = max(0, -(-(args.requests - attacks * len(phases)) // len(phases)))
    tally = Tally()
    for name in phases:
        run_phase(name, args, fuzz, tally)
    print_table(tally)
    if args.examples:
        write_examples(Path(args.examples), tally)
    bad = sum(tally.proxy_5xx.values()) + sum(tally.broken_pairs.values())
    return 1 if bad or tally.no_answer or tally.log_lines else 0


if __name__ == "__main__":
    raise SystemExit(main())
