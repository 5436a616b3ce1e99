"""Availability under hostile load: `/healthz` latency while one client makes the proxy work hard.

    python -m bench.hostile.availability [--only a,b,c,d] [--slow-clients 300]
                                         [--slow-seconds 15] [--dry-runs 60] [--ctxproxy PATH]
                                         [--cpu-hogs 2] [--proxy-path DIR ...] [--sizes 8,30]
                                         [--routes prepare,chat,messages,responses] [--repeat 5]

Starts `ctxproxy serve` (the console script next to this Python) on a free loopback port with a
memory store, the bundled policies (tenant `default`, passthrough: every request carries a key,
so the proxy stores what it offloads) and one upstream: a scripted OpenAI-like server run by this
script on another loopback port. During each scenario a prober *process* sends `GET /healthz`
over one keep-alive connection, one probe 20 ms after the previous answer (a probe not answered
within 2 s counts as unanswered and the connection is reopened; `loaded.py`). `--cpu-hogs N`
keeps N busy Python processes running for the whole run (a loaded host). Scenarios:

a. Large requests prepared (`big_request.py`): a request whose tool result is N MB of fresh
   words (`--sizes`, default 30; never counted before) on each of `--routes` (default
   `prepare`, the dry run), `--repeat` times; with several `--proxy-path` checkouts, one request
   to each in turn, so that versions are compared on the same load (a table of its own).
b. A pathological search on a 20 MB artifact, through the real proxy: one chat completion whose
   tool result is 19,990,000 "a"s (the default policy offloads it). The scripted upstream answers
   every round that still has the read tools with 8 calls of `search_context_artifact` on that
   artifact with pattern "A"*999+"b", and with a plain answer once the proxy stops offering the
   tools (after `read_tool.max_rounds`).
c. Slow clients: N connections send a request line, then one header line every 5 s, for
   `--slow-seconds`; the table also says how many the proxy closed, and when.
d. RSS: a fresh proxy; its RSS (VmRSS) at rest, after `--dry-runs` dry runs each with a unique
   6 MB tool result (each offloaded into the memory store), and 5 s later.

b, c and d run against each `--proxy-path` in turn (the installed `proxy` without one). Prints
Markdown tables. Loopback only; every scenario is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.common.ctxproxy_server import Server, free_port
from bench.hostile.big_request import (
    KEY,
    PLAIN_HEADER,
    add_plain_routes,
    error_reason,
    fresh_words,
    post,
    run_large_requests,
    running_proxy,
    tool_exchange,
)
from bench.hostile.loaded import Latencies, cpu_hogs, probing

LARGE_HEADER = (
    "\n| scenario | proxy | probes answered | p50 ms | p99 ms | max ms | slowest probe per "
    "request, ms | time to answer, median (range) | answers |\n" + "|---" * 9 + "|"
)
SEARCH_PATTERN = "A" * 999 + "b"
SEARCH_CALLS_PER_ROUND = 8
SLOW_LINE_EVERY_S = 5.0
ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")


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
        body = await request.json()
        plain = request.headers.get(PLAIN_HEADER) == "plain"
        answer = _completion({"role": "assistant", "content": "done"}, "stop")
        answer = answer if plain else scripted_answer(body)
        calls = answer["choices"][0]["message"].get("tool_calls") or []
        rounds.append(len(calls))
        return web.json_response(answer)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    add_plain_routes(app)
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


def send(port: int, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    """`body` to `path` with the run's key."""
    return post(port, path, json.dumps(body).encode(), {"Authorization": f"Bearer {KEY}"})


def row(scenario: str, probes: Latencies, note: str) -> str:
    return f"| {scenario} | {probes.cells()} | {note} |"


def scenario_search(server: Server, rounds: list[int]) -> str:
    rounds.clear()
    body = tool_exchange("a" * 19_990_000)
    with probing(server.port) as probes:
        status, payload, seconds = timed(lambda: send(server.port, "/v1/chat/completions", body))
    searches = sum(rounds)
    note = f"answered {status} in {seconds:.1f} s; {searches} searches in {len(rounds) - 1} rounds"
    if status != 200:
        note += f" ({error_reason(payload)})"
    return row("b. search on a 20 MB artifact", probes, note)


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
    return row("c. slow clients", probes, note)


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


def scenario_rss(
    ctxproxy: str | None, upstream_port: int, dry_runs: int, proxy_path: str | None
) -> str:
    with running_proxy(ctxproxy, upstream_port, proxy_path) as server:
        pid = server.proc.pid
        send(server.port, "/v1/context/prepare", tool_exchange("warm up"))
        at_rest = rss_mb(pid)
        statuses: dict[int, int] = {}
        started = time.perf_counter()
        for _ in range(dry_runs):
            body = tool_exchange(fresh_words(6_000_000))
            status, _ = send(server.port, "/v1/context/prepare", body)
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


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", default="a,b,c,d", help="scenarios to run (default: all)")
    parser.add_argument("--slow-clients", type=int, default=300)
    parser.add_argument("--slow-seconds", type=float, default=15.0)
    parser.add_argument("--dry-runs", type=int, default=60)
    parser.add_argument("--ctxproxy", help="the ctxproxy console script (default: next to python)")
    parser.add_argument("--cpu-hogs", type=int, default=0, help="busy processes during the run")
    parser.add_argument(
        "--proxy-path", action="append", default=None,
        help="a checkout whose proxy package runs (repeat to compare; default: the installed one)",
    )  # fmt: skip
    parser.add_argument("--sizes", default="30", help="scenario a: MB of tool result, e.g. 8,30")
    parser.add_argument(
        "--routes", default="prepare", help="scenario a: prepare,chat,messages,responses"
    )
    parser.add_argument("--repeat", type=int, default=1, help="scenario a: requests per cell")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    only = set(args.only.split(","))
    paths: list[str | None] = list(args.proxy_path or [None])
    large, rows = [], []
    with scripted_upstream() as (upstream_port, rounds), cpu_hogs(args.cpu_hogs) as hogs:
        print(f"{len(hogs)} CPU hog(s) running: pids {hogs}", flush=True)
        if "a" in only:
            sizes = [float(size) for size in args.sizes.split(",")]
            routes = args.routes.split(",")
            large = run_large_requests(
                args.ctxproxy, upstream_port, paths, sizes, routes, args.repeat
            )
        for path in paths:
            if only & {"b", "c"}:
                with running_proxy(args.ctxproxy, upstream_port, path) as server:
                    if "b" in only:
                        rows.append(scenario_search(server, rounds))
                    if "c" in only:
                        slow = scenario_slow_clients(server, args.slow_clients, args.slow_seconds)
                        rows.append(slow)
            if "d" in only:
                rows.append(scenario_rss(args.ctxproxy, upstream_port, args.dry_runs, path))
    if large:
        print(LARGE_HEADER)
        print("\n".join(large))
    if rows:
        print("\n| scenario | probes answered | p50 ms | p99 ms | max ms | what happened |")
        print("|---|---|---|---|---|---|")
        print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
