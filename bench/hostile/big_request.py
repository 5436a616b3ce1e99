"""Scenario a of the availability run: `/healthz` while the proxy prepares one large request.

One request whose tool result is N MB of fresh words (never counted before by the proxy), sent
with a credential of its own (passthrough: what the proxy offloads is stored in a scope of the
request's own, so it does all of its work and no tenant's write budget is reached), on one of
the routes:

| route | endpoint | body |
|---|---|---|
| `prepare` | `POST /v1/context/prepare` (the dry run) | a chat completion |
| `chat` | `POST /v1/chat/completions` | a chat completion |
| `messages` | `POST /v1/messages` | Anthropic Messages (`claude-*`: the HF tokenizer counts) |
| `responses` | `POST /v1/responses` | a Responses request |

The scripted upstream answers the completions with plain text (`PLAIN_HEADER`). Each proxy is a
`ctxproxy serve` of the installed console script, with a checkout's directory put first on its
`PYTHONPATH` (`--proxy-path`: that checkout's `proxy` package runs), so that two versions run
side by side on the same machine and load: for each repeat, each size and each route, one
request to each proxy in turn (the order alternating between repeats). A row pools the probes
of a (route, size, proxy)'s repeats and gives the median time to the answer. Before anything is
measured each proxy answers one small request per route (`WARM_UP_CHARS`).
"""

from __future__ import annotations

import http.client
import json
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.common.ctxproxy_server import Server, ctxproxy_command, free_port
from bench.hostile.loaded import Latencies, probing

KEY = "sk-availability-bench"
PLAIN_HEADER = "x-bench-answer"
"""A completion sent with this header (value `plain`) is answered with text, never with calls."""
WARM_UP_CHARS = 20_000
"""Each proxy answers one request of this size per route before anything is measured (the first
request of a format loads its tokenizer: a one-off stall of 50-100 ms, not what is measured)."""
ROUTES = {
    "prepare": "/v1/context/prepare",
    "chat": "/v1/chat/completions",
    "messages": "/v1/messages",
    "responses": "/v1/responses",
}


def fresh_words(chars: int) -> str:
    """`chars` characters of words never seen before by this proxy."""
    tag = uuid.uuid4().hex[:6]
    words = " ".join(f"{tag}{i % 9973}" for i in range(chars // 8 + 1))  # 8+ chars a word
    return words[:chars]


def tool_exchange(content: str) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}
    return {
        "model": "gpt-4.1",
        "messages": [
            {"role": "user", "content": "Read the page and answer."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": content},
            {"role": "user", "content": "What does it say?"},
        ],
    }


def messages_exchange(content: str) -> dict[str, Any]:
    use = {"type": "tool_use", "id": "toolu_1", "name": "fetch", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": content}
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "Read the page and answer."},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result, {"type": "text", "text": "What does it say?"}]},
        ],
    }


def responses_exchange(content: str) -> dict[str, Any]:
    return {
        "model": "gpt-4.1",
        "input": [
            {"role": "user", "content": "Read the page and answer."},
            {"type": "function_call", "call_id": "call_1", "name": "fetch", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": content},
            {"role": "user", "content": "What does it say?"},
        ],
    }


def request_body(route: str, content: str) -> dict[str, Any]:
    if route == "messages":
        return messages_exchange(content)
    if route == "responses":
        return responses_exchange(content)
    return tool_exchange(content)


# -- the scripted upstream's plain answers ------------------------------------------------------


def plain_messages_answer() -> dict[str, Any]:
    return {
        "id": "msg_availability",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def plain_responses_answer() -> dict[str, Any]:
    text = {"type": "output_text", "text": "done", "annotations": []}
    message = {
        "type": "message",
        "id": "msg_availability",
        "role": "assistant",
        "status": "completed",
        "content": [text],
    }
    return {
        "id": "resp_availability",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": "gpt-4.1",
        "output": [message],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }


def add_plain_routes(app: web.Application) -> None:
    """`/v1/messages` and `/v1/responses`, answered with text whatever they are asked."""

    async def messages(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response(plain_messages_answer())

    async def responses(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response(plain_responses_answer())

    app.router.add_post("/v1/messages", messages)
    app.router.add_post("/v1/responses", responses)


# -- the proxies ------------------------------------------------------------------------------


@contextmanager
def running_proxy(
    ctxproxy: str | None, upstream_port: int, proxy_path: str | None = None
) -> Iterator[Server]:
    """A `ctxproxy serve` on a free port (memory store, passthrough, the bundled policies);
    `proxy_path` first on its `PYTHONPATH` runs that checkout's `proxy` package."""
    with tempfile.TemporaryDirectory(prefix="ctxproxy-availability-") as tmp:
        port = free_port()
        config = {
            "server": {"host": "127.0.0.1", "port": port, "log_level": "WARNING"},
            "store": {"kind": "memory", "secret": "availability-bench"},
            "upstreams": [{"name": "scripted", "base_url": f"http://127.0.0.1:{upstream_port}/v1"}],
        }
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config))
        argv = [*ctxproxy_command(ctxproxy), "serve", "--config", str(path)]
        env = {"PYTHONPATH": proxy_path} if proxy_path else None
        server = Server(argv, port, Path(tmp) / "ctxproxy.log", env=env)
        try:
            server.wait_ready()
            yield server
        finally:
            server.stop()


def describe(proxy_path: str | None) -> str:
    """A proxy's label: its checkout and commit (`installed` without `--proxy-path`)."""
    if not proxy_path:
        return "installed"
    found = subprocess.run(
        ["git", "-C", proxy_path, "describe", "--always", "--dirty"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return f"{proxy_path} @ {found.stdout.strip() or '?'}"


def post(
    port: int, path: str, data: bytes, headers: dict[str, str], timeout: float = 600
) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", path, data, {"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def error_reason(payload: bytes) -> str:
    try:
        error = json.loads(payload)["error"]
        return str(error.get("ctxproxy", {}).get("reason") or error.get("type") or error["code"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return payload[:60].decode(errors="replace")


# -- the runs ---------------------------------------------------------------------------------


@dataclass
class Cell:
    """The repeats of one (route, size, proxy)."""

    probes: Latencies = field(default_factory=Latencies)
    seconds: list[float] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    worst: list[float] = field(default_factory=list)
    """The slowest probe of each request (ms)."""

    def add(self, probes: Latencies, seconds: float, outcome: str) -> None:
        self.probes.add(probes)
        self.seconds.append(seconds)
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.worst.append(probes.ms(1.0))

    def row(self, route: str, mb: float, label: str) -> str:
        outcomes = ", ".join(f"{n}x {what}" for what, n in sorted(self.outcomes.items()))
        median = statistics.median(self.seconds)
        spread = f"{min(self.seconds):.1f}-{max(self.seconds):.1f}"
        worst = ", ".join(f"{ms:.0f}" for ms in sorted(self.worst))
        return (
            f"| a. {mb:g} MB {route} | {label} | {self.probes.cells()} | {worst} | "
            f"{median:.2f} s ({spread}) | {outcomes} |"
        )


def measure(port: int, route: str, mb: float, key: str) -> tuple[Latencies, float, str]:
    """One large request on `route`: the probes during it, its time to the answer, its outcome."""
    data = json.dumps(request_body(route, fresh_words(int(mb * 1_000_000)))).encode()
    own = f"{key}-{uuid.uuid4().hex[:12]}"  # a scope of its own: no store budget is reached
    headers = {"Authorization": f"Bearer {own}", PLAIN_HEADER: "plain"}
    with probing(port) as probes:
        started = time.perf_counter()
        status, payload = post(port, ROUTES[route], data, headers)
        seconds = time.perf_counter() - started
    outcome = f"{status}" if status == 200 else f"{status} ({error_reason(payload)})"
    return probes, seconds, outcome


def run_large_requests(
    ctxproxy: str | None,
    upstream_port: int,
    proxy_paths: list[str | None],
    sizes_mb: list[float],
    routes: list[str],
    repeat: int,
    key: str = KEY,
) -> list[str]:
    """Markdown rows (scenario, proxy, probes, p50, p99, max, the slowest probe of each request,
    time to answer, outcomes)."""
    cells: dict[tuple[str, float, int], Cell] = {}
    with ExitStack() as stack:
        servers = [
            stack.enter_context(running_proxy(ctxproxy, upstream_port, p)) for p in proxy_paths
        ]
        for server in servers:  # tokenizers loaded, code warm: not measured
            for route in routes:
                data = json.dumps(request_body(route, fresh_words(WARM_UP_CHARS))).encode()
                post(server.port, ROUTES[route], data, {"Authorization": f"Bearer {key}"})
        for turn in range(repeat):
            order = list(range(len(servers)))
            if turn % 2:
                order.reverse()
            for mb in sizes_mb:
                for route in routes:
                    for index in order:
                        probes, seconds, outcome = measure(servers[index].port, route, mb, key)
                        cells.setdefault((route, mb, index), Cell()).add(probes, seconds, outcome)
                        print(f"  {route} {mb:g} MB, proxy {index + 1}, run {turn + 1}: "
                              f"p99 {probes.ms(0.99):.1f} ms, max {probes.ms(1):.1f} ms, "
                              f"{seconds:.2f} s, {outcome}", flush=True)  # fmt: skip
    labels = [describe(p) for p in proxy_paths]
    return [
        cells[(route, mb, index)].row(route, mb, labels[index])
        for route in routes
        for mb in sizes_mb
        for index in range(len(proxy_paths))
    ]
