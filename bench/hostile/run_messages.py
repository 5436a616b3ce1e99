"""Hostile-input run for Anthropic Messages: generated requests through a real ctxproxy server.

    python -m bench.hostile.run_messages [--requests 2000] [--seed 11] [--concurrency 4]
                                         [--redis] [--scale 1] [--ctxproxy PATH]

Starts `ctxproxy serve` (passthrough auth, every request under the small-window policy `tiny` of
`bench/hostile/server.py`: offload, clear and drop happen, the read rounds run) in front of the
fake Anthropic server of the tests (an `anthropic` upstream), scripted per request by
`bench/hostile/upstream_messages.py` (read calls in JSON and SSE, hostile read inputs, failures
on purpose). Memory store by default; `--redis` uses 127.0.0.1:6379 under a unique key prefix,
deleted afterwards. Requests: `bench/hostile/messages.py` (10,000 tiny messages, 2-5 MB tool
results, read rounds per script, then hypothesis-drawn hostile bodies, one in eight to
count_tokens).

Counted: statuses; **proxy 5xx** = any 5xx except a 5xx answering a failure made on purpose;
answers to bad input that are not Anthropic's error envelope; SSE `error` events; every upstream
body checked for tool pairs, thinking integrity and <= 4 cache_control markers (problems count
only when the client's own body was sound; bodies broken on arrival are counted apart); the
proxy log scanned for Traceback and ERROR lines.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

import aiohttp
from fakes import FakeUpstream

from bench.common.ctxproxy_server import free_port
from bench.hostile.cases import Case
from bench.hostile.messages import (
    MAX_MARKS,
    attack_cases,
    count_marks,
    fuzz_cases,
    pair_problems,
    parsed,
    thinking_key,
    thinking_messages,
    thinking_problems,
)
from bench.hostile.server import TINY, delete_prefix, running_proxy
from bench.hostile.upstream_base import REQUEST_HEADER, SCRIPT_HEADER
from bench.hostile.upstream_messages import FAULTS, scripted

BATCH = 64
TIMEOUT = aiohttp.ClientTimeout(total=240)
LEAKED = re.compile(rb"toolu_[rbcd][0-9]+")
CREDENTIALS: tuple[dict[str, str], ...] = (
    {"x-api-key": "sk-ant-a"},
    {"Authorization": "Bearer sk-ant-b"},
    {},
)


def counter() -> collections.Counter[str]:
    return collections.Counter()


class Run:
    def __init__(self, port: int) -> None:
        self.port = port
        self.number = 0
        self.sent: dict[int, Case] = {}
        self.upstream: dict[int, int] = collections.defaultdict(int)
        self.t: dict[str, collections.Counter[str]] = collections.defaultdict(counter)
        self.bodies = 0
        self.answers: dict[int, list[Any]] = {}
        """Every request's upstream answers (filled as the fake answers)."""
        self.answered_before: set[str] = set()
        self.taken: dict[int, int] = {}

    def on_body(self, number: int, path: str, raw: bytes, answered: list[Any]) -> None:
        case = self.sent.get(number)
        if case is None:
            return
        self.answers[number] = answered
        for earlier, answers in self.answers.items():  # only what was answered since last time
            fresh = answers[self.taken.get(earlier, 0) :]
            self.taken[earlier] = len(answers)
            self.answered_before |= {thinking_key(m) for m in thinking_messages(fresh)}
        self.bodies += 1
        self.upstream[number] += 1
        body = parsed(raw)
        client = parsed(case.body)
        problems: list[str] = []
        if not isinstance(body, dict):
            problems.append("upstream body is not a JSON object")
        else:
            messages = body.get("messages")
            if not path.endswith("count_tokens") or messages is not None:
                problems += pair_problems(messages)
            known = (client.get("messages") if isinstance(client, dict) else None) or []
            problems += thinking_problems(messages, list(known) + answered, self.answered_before)
            if count_marks(body) > MAX_MARKS:
                problems.append(f"{count_marks(body)} cache_control markers")
        if not problems:
            return
        if case.well_formed:
            self.t["upstream problems (client body sound)"][f"{case.category}: {problems[0]}"] += 1
        else:
            untouched = "untouched" if raw == case.body else f"changed: {problems[0][:70]}"
            self.t["upstream bodies broken on arrival"][untouched] += 1

    async def send(self, session: aiohttp.ClientSession, case: Case) -> None:
        self.number += 1
        number = self.number
        self.sent[number] = case
        headers = {
            **CREDENTIALS[number % 3],
            REQUEST_HEADER: str(number),
            SCRIPT_HEADER: case.script,
            "Content-Type": "application/json",
        }
        if number % 4 == 0:
            headers["anthropic-version"] = "2023-06-01"
        self.t["requests"][case.category] += 1
        started = time.monotonic()
        try:
            url = f"http://127.0.0.1:{self.port}{case.path}"
            async with session.post(url, data=case.body, headers=headers) as response:
                status, answer = response.status, await response.read()
                streamed = response.headers.get("Content-Type", "").startswith("text/event")
                actions = response.headers.get("x-ctxproxy-actions", "none")
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.t["no answer"][f"{case.category}: {type(exc).__name__}"] += 1
            return
        finally:
            self.t["seconds"][case.category] += int((time.monotonic() - started) * 1000)
            self.sent.pop(number)
        for action in actions.split(","):
            self.t["actions"][action.split(":")[0]] += 1
        self.t["with read rounds"]["n"] += self.upstream.pop(number, 0) > 1
        self.judge(case, status, answer, streamed)

    def judge(self, case: Case, status: int, answer: bytes, streamed: bool) -> None:
        self.t["statuses"][str(status)] += 1
        faulted = case.script in FAULTS
        own = b"Internal proxy error" in answer or b"Server got itself in trouble" in answer
        if status >= 500 and (own or not faulted):
            self.t["proxy 5xx"][f"{case.category}: {status} {answer[:120]!r}"] += 1
        if status >= 400 and not _anthropic_error(answer):
            self.t["error not in Anthropic's envelope"][f"{status} {answer[:100]!r}"] += 1
        if status == 400 and case.well_formed and case.script != "fault_too_long":
            self.t["sound body refused (400)"][_reason(answer)] += 1
        if status == 200:
            for finding in answer_findings(answer, streamed) + leaked_calls(case, answer):
                self.t["answer findings"][f"{case.category}/{case.script}: {finding}"] += 1
        if streamed:
            for line in answer.split(b"\n"):
                if line.startswith(b"event: error"):
                    why = " (failure on purpose)" if faulted else ""
                    self.t["SSE error events"][f"{case.script}{why}"] += 1

    async def send_all(self, cases: list[Case], concurrency: int) -> None:
        semaphore = asyncio.Semaphore(concurrency)

        async def one(session: aiohttp.ClientSession, case: Case) -> None:
            async with semaphore:
                await self.send(session, case)

        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            await asyncio.gather(*(one(session, c) for c in cases))


def answer_findings(answer: bytes, streamed: bool) -> list[str]:
    """A proxy's synthetic call shown to the client (ids `toolu_[rbcd]<n>` of the scripted
    read calls); a stream without `message_start` first or without `message_stop` (unless an
    error event ends it); block indices not contiguous from 0."""
    found = [f"synthetic call leaked: {m.group()!r}" for m in LEAKED.finditer(answer)]
    if not streamed:
        return found
    events = [parsed(line[6:]) for line in answer.split(b"\n") if line.startswith(b"data: ")]
    kinds = [e.get("type") for e in events if isinstance(e, dict)]
    if not kinds or kinds[0] != "message_start":
        found.append(f"stream starts with {kinds[:1]}")
    if "error" not in kinds and (not kinds or kinds[-1] != "message_stop"):
        found.append(f"stream ends with {kinds[-1:]}")
    starts = [
        e.get("index")
        for e in events
        if isinstance(e, dict) and e.get("type") == "content_block_start"
    ]
    if starts != list(range(len(starts))):
        found.append(f"block indices {starts[:6]}")
    return found


def leaked_calls(case: Case, answer: bytes) -> list[str]:
    """Calls of the proxy's read tool shown to the client: a `tool_use` named like it that
    names no tool of the client's request."""
    client = parsed(case.body)
    tools = client.get("tools") if isinstance(client, dict) else None
    own = (
        {t.get("name") for t in tools if isinstance(t, dict)} if isinstance(tools, list) else set()
    )
    names = re.findall(rb'"type":\s*"tool_use"[^{}]*?"name":\s*"([^"]*)"', answer)
    return [
        f"read call leaked: {n[:40]!r}"
        for n in names
        if n.startswith(b"read_context_artifact") and n.decode() not in own
    ]


def _reason(answer: bytes) -> str:
    body = parsed(answer)
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return re.sub(r"[0-9]+", "N", str(message))[:90]


def _anthropic_error(answer: bytes) -> bool:
    body = parsed(answer)
    error = body.get("error") if isinstance(body, dict) else None
    return (
        isinstance(body, dict)
        and body.get("type") == "error"
        and isinstance(error, dict)
        and isinstance(error.get("type"), str)
        and isinstance(error.get("message"), str)
    )


def proxy_config(port: int, upstream: str, prefix: str | None, tmp: Path) -> Path:
    policies = tmp / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "tiny.yaml").write_text(TINY)
    store: dict[str, Any] = {"kind": "memory", "secret": "hostile-run"}
    if prefix is not None:
        store = {**store, "kind": "redis", "url": "redis://127.0.0.1:6379/0", "key_prefix": prefix}
    config = {
        "server": {"host": "127.0.0.1", "port": port, "log_level": "WARNING", "log_format": "text"},
        "store": store,
        "upstreams": [
            {
                "name": "claude",
                "kind": "anthropic",
                "base_url": upstream,
                "timeouts": {"first_byte_s": 20, "idle_read_s": 20, "total_s": 120},
            }
        ],
        "auth": {"mode": "passthrough", "passthrough_tenant": "tiny"},
        "tenants": [{"name": "tiny", "policy": "tiny"}],
        "policies_dir": str(policies),
    }
    path = tmp / "messages.json"
    path.write_text(json.dumps(config))
    return path


def run(args: argparse.Namespace) -> dict[str, collections.Counter[str]]:
    loop = asyncio.new_event_loop()
    holder: list[Run] = []
    fake = FakeUpstream(default=scripted(lambda *a: holder[0].on_body(*a)))
    loop.run_until_complete(fake.start())
    prefix = f"ctxproxy-hostile-msg-{uuid.uuid4().hex[:12]}:" if args.redis else None
    log_lines: collections.Counter[str] = collections.Counter()
    try:
        with tempfile.TemporaryDirectory(prefix="ctxproxy-hostile-msg-") as tmp:
            port = free_port()
            config = proxy_config(port, fake.origin, prefix, Path(tmp))
            with running_proxy(args.ctxproxy, config, port, log_lines):
                holder.append(Run(port))
                send_everything(loop, holder[0], args)
            if args.keep_log:
                shutil.copy(config.with_suffix(".log"), args.keep_log)
    finally:
        loop.run_until_complete(fake.stop())
        loop.close()
        if prefix is not None:
            print(f"deleted {delete_prefix(prefix)} Redis keys under {prefix}")
    tally = holder[0].t
    tally["proxy log: Traceback / ERROR / exit"] = log_lines
    tally["bodies received upstream"]["n"] = holder[0].bodies
    return tally


def send_everything(loop: asyncio.AbstractEventLoop, r: Run, args: argparse.Namespace) -> None:
    started = time.monotonic()
    cases = list(attack_cases(args.scale))
    loop.run_until_complete(r.send_all([c for c in cases if c.heavy], 1))
    light = [c for c in cases if not c.heavy]
    for start in range(0, len(light), BATCH):
        loop.run_until_complete(r.send_all(light[start : start + BATCH], args.concurrency))
    buffer: list[Case] = []

    def sink(case: Case) -> None:
        buffer.append(case)
        if len(buffer) >= BATCH:
            loop.run_until_complete(r.send_all(buffer[:], args.concurrency))
            buffer.clear()

    fuzz_cases(max(0, args.requests - len(cases)), args.seed, sink)
    loop.run_until_complete(r.send_all(buffer, args.concurrency))
    print(f"{r.number} requests in {time.monotonic() - started:.0f} s", flush=True)


def print_table(tally: dict[str, collections.Counter[str]]) -> None:
    requests = tally.pop("requests")
    seconds = tally.pop("seconds")
    print(f"\n| requests by category ({sum(requests.values())}) | n | s (sum) |\n|---|---|---|")
    for category, n in sorted(requests.items()):
        print(f"| {category} | {n} | {seconds[category] / 1000:.0f} |")
    print("\n| measured | value |\n|---|---|")
    for what, found in sorted(tally.items()):
        if not found:
            print(f"| {what} | 0 |")
            continue
        parts = "; ".join(f"{k}: {n}" for k, n in found.most_common(10))
        print(f"| {what} | {sum(found.values())} ({parts}) |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=2000, help="at least this many in all")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--scale", type=int, default=1, help="multiplies the read-round cases")
    parser.add_argument("--redis", action="store_true", help="store in 127.0.0.1:6379")
    parser.add_argument("--keep-log", help="copy the proxy's log there")
    parser.add_argument("--ctxproxy", help="the ctxproxy console script (default: next to python)")
    args = parser.parse_args(argv)
    tally = run(args)
    for name in (
        "proxy 5xx",
        "upstream problems (client body sound)",
        "no answer",
        "error not in Anthropic's envelope",
        "proxy log: Traceback / ERROR / exit",
    ):
        tally.setdefault(name, collections.Counter())
    bad = sum(
        sum(tally[k].values())
        for k in (
            "proxy 5xx",
            "upstream problems (client body sound)",
            "no answer",
            "proxy log: Traceback / ERROR / exit",
        )
    )
    print_table(tally)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
