"""Availability under hostile load: `/healthz` latency while one client makes the proxy work hard.

    python -m bench.hostile.availability [--only a,b,c,d] [--slow-clients 300]
                                         [--slow-seconds 15] [--dry-runs 60] [--ctxproxy PATH]

Starts `ctxproxy serve` (the console script next to this Python) on a free loopback port with a
memory store, the bundled policies (tenant `default`) and one upstream: a scripted OpenAI-like
server run by this script on another loopback port. During each scenario a prober thread sends
`GET /healthz` over one keep-alive connection, one probe 20 ms after the previous answer (a probe
not answered within 2 s counts as unanswered and the connection is reopened). Scenarios:

a. A 30 MB request prepared: one `POST /v1/context/prepare` whose tool result is 30 MB of fresh
   words (never counted before; over the default `artifacts.max_chars`, so it is refused).
b. A pathological search on a 20 MB artifact, through the real proxy: one chat completion whose
   tool result is 19,990,000 "a"s (the default policy offloads it). The scripted upstream answers
   every round that still has the read tools with 8 calls of `search_context_artifact` on that
   artifact with pattern "A"*999+"b", and with a plain answer once the proxy stops offering the
   tools (after `read_tool.max_rounds`).
c. Slow clients: N connections send a request line, then one header line every 5 s, for
   `--slow-seconds`; the table also says how many the proxy closed, and when.
d. RSS: a fresh proxy; its RSS (VmRSS) at rest, after `--dry-runs` dry runs each with a unique
   6 MB tool result (each offloaded into the memory store), and 5 s later.

Prints a Markdown table. Loopback only; every scenario is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import re
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.common.ctxproxy_server import Server, ctxproxy_command, free_port

PROBE_PAUSE_S = 0.02
PROBE_TIMEOUT_S = 2.0
SEARCH_PATTERN = "A" * 999 + "b"
SEARCH_CALLS_PER_ROUND = 8
SLOW_LINE_EVERY_S = 5.0
ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")


# -- the prober -------------------------------------------------------------------------------


@dataclass
class Probes:
    sent: int = 0
    latencies: list[float] = field(default_factory=list)

    def row(self, scenario: str, note: str) -> str:
        ordered = sorted(self.latencies) or [float("nan")]

        def ms(q: float) -> str:
            return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.1f}"

        return (
            f"| {scenario} | {len(self.latencies)}/{self.sent} | {ms(0.5)} | {ms(0.99)} | "
            f"{ordered[-1] * 1000:.1f} | {note} |"
        )


@contextmanager
def probing(port: int) -> Iterator[Probes]:
    probes = Probes()
    stop = threading.Event()

    def run() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT_S)
        while not stop.is_set():
            probes.sent += 1
            started = time.perf_counter()
            try:
                connection.request("GET", "/healthz")
                response = connection.getresponse()
                response.read()
                if response.status == 200:
                    probes.latencies.append(time.perf_counter() - started)
            except OSError:
                connection.close()
            stop.wait(PROBE_PAUSE_S)
        connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.2)
    try:
        yield probes
    finally:
        time.sleep(0.2)
        stop.set()
        thread.join(10)


# -- the scripted upstream --------------------------------------------------------------------


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-availability",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def scripted_answer(body: dict[str, Any]) -> dict[str, Any]:
    """Search calls while the proxy offers its search tool and an artifact is named, else text."""
    names = [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
    search = next((n for n in names if n.endswith("search_context_artifact")), None)
    ids = ARTIFACT_ID.findall(json.dumps(body.get("messages")))
    if search is None or not ids:
        return _completion({"role": "assistant", "content": "done"}, "stop")
    arguments = json.dumps({"artifact_id": ids[0], "pattern": SEARCH_PATTERN})
    calls = [
        {
            "id": f"call_search_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": search, "arguments": arguments},
        }
        for _ in range(SEARCH_CALLS_PER_ROUND)
    ]
    return _completion({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls")


@contextmanager
def scripted_upstream() -> Iterator[tuple[int, list[int]]]:
    """(port, number of search calls sent per round) of an upstream running in a thread."""
    rounds: list[int] = []

    async def chat(request: web.Request) -> web.Response:
        answer = scripted_answer(await request.json())
        calls = answer["choices"][0]["message"].get("tool_calls") or []
        rounds.append(len(calls))
        return web.json_response(answer)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    port = free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port, rounds
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


# -- the proxy --------------------------------------------------------------------------------


@contextmanager
def running_proxy(ctxproxy: str | None, upstream_port: int) -> Iterator[Server]:
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
        server = Server(argv, port, Path(tmp) / "ctxproxy.log")
        try:
            server.wait_ready()
            yield server
        finally:
            server.stop()


def post(port: int, path: str, body: dict[str, Any], timeout: float = 300) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode()
        connection.request("POST", path, data, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


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


def fresh_words(chars: int) -> str:
    """About `chars` characters of words never seen before by this proxy."""
    tag = uuid.uuid4().hex[:6]
    words = " ".join(f"{tag}{i % 9973}" for i in range(chars // 12 + 1))
    return words[:chars]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- scenarios --------------------------------------------------------------------------------


def timed(work: Callable[[], tuple[int, bytes]]) -> tuple[int, bytes, float]:
    started = time.perf_counter()
    status, payload = work()
    return status, payload, time.perf_counter() - started


def scenario_large_request(server: Server) -> str:
    body = tool_exchange(fresh_words(30_000_000))
    with probing(server.port) as probes:
        status, payload, seconds = timed(lambda: post(server.port, "/v1/context/prepare", body))
    reason = _error_reason(payload) if status != 200 else "prepared"
    return probes.row("a. 30 MB dry run", f"answered {status} ({reason}) in {seconds:.1f} s")


def _error_reason(payload: bytes) -> str:
    try:
        error = json.loads(payload)["error"]
        return str(error.get("ctxproxy", {}).get("reason") or error["code"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return payload[:60].decode(errors="replace")


def scenario_search(server: Server, rounds: list[int]) -> str:
    rounds.clear()
    body = tool_exchange("a" * 19_990_000)
    with probing(server.port) as probes:
        status, payload, seconds = timed(lambda: post(server.port, "/v1/chat/completions", body))
    searches = sum(rounds)
    note = f"answered {status} in {seconds:.1f} s; {searches} searches in {len(rounds) - 1} rounds"
    if status != 200:
        note += f" ({_error_reason(payload)})"
    return probes.row("b. search on a 20 MB artifact", note)


def scenario_slow_clients(server: Server, count: int, seconds: float) -> str:
    sockets: list[socket.socket] = []
    closed_after: list[float] = []
    refused = 0
    with probing(server.port) as probes:
        started = time.monotonic()
        for _ in range(count):
            try:
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                sock.setblocking(False)
                sockets.append(sock)
            except OSError:
                refused += 1
        open_ = list(sockets)
        next_line = started + SLOW_LINE_EVERY_S
        line = 0
        while time.monotonic() - started < seconds and open_:
            time.sleep(0.25)
            closed = [sock for sock in open_ if _closed_by_peer(sock)]
            closed_after += [time.monotonic() - started] * len(closed)
            open_ = [sock for sock in open_ if sock not in closed]
            if time.monotonic() >= next_line:
                next_line += SLOW_LINE_EVERY_S
                line += 1
                for sock in open_:
                    _send_line(sock, line)
    for sock in sockets:
        sock.close()
    when = (
        f", {min(closed_after):.1f}-{max(closed_after):.1f} s after connecting"
        if closed_after
        else ""
    )
    note = (
        f"{count} slow connections for {seconds:.0f} s: {len(closed_after)} closed by the proxy"
        f"{when}; {refused} failed to connect"
    )
    return probes.row("c. slow clients", note)


def _send_line(sock: socket.socket, line: int) -> None:
    """One more header line (a connection the proxy closed is counted on the next tick)."""
    with contextlib.suppress(OSError):
        sock.sendall(b"X-Slow-%d: 1\r\n" % line)


def _closed_by_peer(sock: socket.socket) -> bool:
    """True once the proxy answered (a 408) or closed the connection."""
    try:
        sock.recv(65536, socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True


def scenario_rss(ctxproxy: str | None, upstream_port: int, dry_runs: int) -> str:
    with running_proxy(ctxproxy, upstream_port) as server:
        pid = server.proc.pid
        post(server.port, "/v1/context/prepare", tool_exchange("warm up"))
        at_rest = rss_mb(pid)
        statuses: dict[int, int] = {}
        started = time.perf_counter()
        for _ in range(dry_runs):
            body = tool_exchange(fresh_words(6_000_000))
            status, _ = post(server.port, "/v1/context/prepare", body)
            statuses[status] = statuses.get(status, 0) + 1
        seconds = time.perf_counter() - started
        after = rss_mb(pid)
        time.sleep(5)
        later = rss_mb(pid)
    answers = ", ".join(f"{n}x {s}" for s, n in sorted(statuses.items()))
    return (
        f"| d. RSS, {dry_runs} unique 6 MB dry runs | - | - | - | - | at rest {at_rest:.0f} MB, "
        f"after {after:.0f} MB, 5 s later {later:.0f} MB ({answers}, {seconds:.0f} s) |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", default="a,b,c,d", help="scenarios to run (default: all)")
    parser.add_argument("--slow-clients", type=int, default=300)
    parser.add_argument("--slow-seconds", type=float, default=15.0)
    parser.add_argument("--dry-runs", type=int, default=60)
    parser.add_argument("--ctxproxy", help="the ctxproxy console script (default: next to python)")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    rows = []
    with scripted_upstream() as (upstream_port, rounds):
        if only & {"a", "b", "c"}:
            with running_proxy(args.ctxproxy, upstream_port) as server:
                if "a" in only:
                    rows.append(scenario_large_request(server))
                if "b" in only:
                    rows.append(scenario_search(server, rounds))
                if "c" in only:
                    rows.append(scenario_slow_clients(server, args.slow_clients, args.slow_seconds))
        if "d" in only:
            rows.append(scenario_rss(args.ctxproxy, upstream_port, args.dry_runs))
    print("| scenario | probes answered | p50 ms | p99 ms | max ms | what happened |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
