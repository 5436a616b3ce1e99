"""Closed-loop HTTP/1.1 load generator for the overhead benchmark (runs in its own process).

`--concurrency` keep-alive connections each send the same POST again as soon as the previous
answer is complete. Measures, per request, the latency to the complete answer and the time to the
first body byte (for SSE: the first `data:` bytes). Prints one JSON object:

    {"requests", "errors", "rps", "p50_us", "p99_us", "ttfb_p50_us", "ttfb_p99_us", ...}

Only requests that start and end inside the measured window count (after `--warmup` seconds).
Runs on uvloop when it is installed.

    python bench/overhead/loadgen.py http://127.0.0.1:9100/v1/chat/completions body.json -c 16 -d 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 10.0


class _Conn(asyncio.Protocol):
    """One keep-alive connection; `send()` resolves to (status, ttfb_ns, done_ns, keep_alive)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost = asyncio.get_running_loop().create_future()
        self._waiter: asyncio.Future[tuple[int, int, int, bool]] | None = None
        self._reset()

    def _reset(self) -> None:
        self._buf = bytearray()
        self._status = 0
        self._body_at = -1  # index of the first body byte, once the head is parsed
        self._length = -1  # Content-Length, or -1 for chunked
        self._pos = 0  # chunked parser position
        self._pending = 0  # bytes of chunk data + CRLF still to skip
        self._ttfb = 0
        self._keep = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if not self.lost.done():
            self.lost.set_result(None)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionError("connection lost"))

    def send(self, request: bytes) -> asyncio.Future[tuple[int, int, int, bool]]:
        assert self.transport is not None
        self._reset()
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self._waiter

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        self._buf += data
        if self._body_at < 0 and not self._parse_head():
            return
        if not self._ttfb and self._first_body_byte():
            self._ttfb = now
        if self._complete() and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result((self._status, self._ttfb or now, now, self._keep))

    def _parse_head(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            return False
        head = bytes(self._buf[:end]).lower()
        self._status = int(head[9:12])
        self._keep = b"\r\nconnection: close" not in head
        at = head.find(b"\r\ncontent-length:")
        if at >= 0:
            stop = head.find(b"\r\n", at + 2)
            self._length = int(head[at + 17 : stop if stop >= 0 else None])
        elif b"\r\ntransfer-encoding: chunked" in head:
            self._length = -1
        else:
            self._length = -2  # until the connection closes (unsupported: treated as error)
        self._body_at = self._pos = end + 4
        return True

    def _first_body_byte(self) -> bool:
        if self._length >= 0:
            return len(self._buf) > self._body_at or self._length == 0
        return self._buf.find(b"data:", self._body_at) >= 0

    def _complete(self) -> bool:
        if self._length >= 0:
            return len(self._buf) - self._body_at >= self._length
        if self._length == -2:
            return False
        buf = self._buf
        while True:
            if self._pending:
                if len(buf) - self._pos < self._pending:
                    return False
                self._pos += self._pending
                self._pending = 0
            nl = buf.find(b"\r\n", self._pos)
            if nl < 0:
                return False
            size = int(bytes(buf[self._pos : nl]).split(b";")[0], 16)
            if size == 0:
                return buf.find(b"\r\n\r\n", nl) >= 0
            self._pos = nl + 2
            self._pending = size + 2


def build_request(url: str, body: bytes, authorization: str) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Authorization: {authorization}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return host, port, head.encode() + body


class Stats:
    def __init__(self) -> None:
        self.latency: list[int] = []
        self.ttfb: list[int] = []
        self.errors = 0
        self.statuses: dict[int, int] = {}
        self.completed = 0  # every answer, warm-up and late ones included (for CPU per request)


async def _worker(
    host: str, port: int, request: bytes, window: tuple[int, int], stop: int, stats: Stats
) -> None:
    loop = asyncio.get_running_loop()
    conn: _Conn | None = None
    while time.perf_counter_ns() < stop:
        try:
            if conn is None or conn.transport is None:
                _, conn = await asyncio.wait_for(
                    loop.create_connection(_Conn, host, port), CONNECT_TIMEOUT_S
                )
            start = time.perf_counter_ns()
            status, ttfb, done, keep = await conn.send(request)
        except (OSError, ConnectionError, TimeoutError):
            stats.errors += 1
            conn = None
            await asyncio.sleep(0.01)
            continue
        stats.completed += 1
        if window[0] <= start and done <= window[1]:
            stats.statuses[status] = stats.statuses.get(status, 0) + 1
            if status == 200:
                stats.latency.append(done - start)
                stats.ttfb.append(ttfb - start)
            else:
                stats.errors += 1
        if not keep and conn.transport is not None:
            conn.transport.close()
            conn = None
    if conn is not None and conn.transport is not None:
        conn.transport.close()


def percentile(values: list[int], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with open(args.body, "rb") as handle:
        body = handle.read()
    host, port, request = build_request(args.url, body, args.authorization)
    now = time.perf_counter_ns()
    begin = now + int(args.warmup * 1e9)
    end = begin + int(args.duration * 1e9)
    stats = Stats()
    tasks = [
        asyncio.create_task(_worker(host, port, request, (begin, end), end, stats))
        for _ in range(args.concurrency)
    ]
    # Answers still outstanding at the end of the window are abandoned (their sockets closed).
    _done, pending = await asyncio.wait(tasks, timeout=args.warmup + args.duration + args.grace)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return {
        "loader": "python",
        "requests": len(stats.latency),
        "completed": stats.completed,
        "errors": stats.errors,
        "statuses": stats.statuses,
        "duration_s": args.duration,
        "rps": len(stats.latency) / args.duration,
        "p50_us": percentile(stats.latency, 0.50),
        "p99_us": percentile(stats.latency, 0.99),
        "ttfb_p50_us": percentile(stats.ttfb, 0.50),
        "ttfb_p99_us": percentile(stats.ttfb, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="closed-loop POST load generator")
    parser.add_argument("url")
    parser.add_argument("body", help="file with the request body")
    parser.add_argument("-c", "--concurrency", type=int, default=1)
    parser.add_argument("-d", "--duration", type=float, default=5.0, help="measured seconds")
    parser.add_argument("-w", "--warmup", type=float, default=0.5, help="unmeasured seconds")
    parser.add_argument("--grace", type=float, default=2.0, help="wait for late answers")
    parser.add_argument("--authorization", default="Bearer sk-bench")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(run(args))
    else:
        result = uvloop.run(run(args))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
