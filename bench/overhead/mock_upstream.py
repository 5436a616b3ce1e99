"""A fast mock OpenAI upstream for the overhead benchmark (NOT the test fake).

A bare asyncio protocol speaking just enough HTTP/1.1 (keep-alive, Content-Length request bodies)
to answer every POST with one pre-encoded chat completion, or, when the request body says
`"stream": true`, with an SSE stream of `--chunks` chunks (chunked transfer encoding): headers and
the first chunk at once, then one chunk every `--interval-ms`, then `data: [DONE]`. Any GET answers
`{"status": "ok"}`. Runs on uvloop when it is installed.

    python bench/overhead/mock_upstream.py --port 9100 [--chunks 16] [--interval-ms 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal

MODEL = "gpt-4o"
COMPLETION = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "OK. The build passes now."},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 8, "total_tokens": 108},
    },
    separators=(",", ":"),
).encode()
JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n"
)
HEALTH = b'{"status":"ok"}'


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_frames(chunks: int) -> list[bytes]:
    """Pre-encoded chunked-transfer frames: `chunks` content deltas, a finish chunk, [DONE]."""
    frames = []
    for i in range(chunks):
        delta = {"role": "assistant", "content": "tok "} if i == 0 else {"content": f"tok{i} "}
        event = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
        frames.append(_frame(b"data: " + json.dumps(event).encode() + b"\n\n"))
    final = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": chunks, "total_tokens": 100 + chunks},
    }
    frames.append(_frame(b"data: " + json.dumps(final).encode() + b"\n\n"))
    frames.append(_frame(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    return frames


def wants_stream(body: bytes) -> bool:
    """True when the JSON body has `"stream": true` (a byte scan; the body is not parsed)."""
    start = 0
    while (at := body.find(b'"stream"', start)) >= 0:
        rest = body[at + 8 : at + 24].lstrip()
        if rest.startswith(b":") and rest[1:].lstrip().startswith(b"true"):
            return True
        start = at + 8
    return False


class MockProtocol(asyncio.Protocol):
    def __init__(self, frames: list[bytes], interval: float) -> None:
        self._frames = frames
        self._interval = interval
        self._buf = bytearray()  # unparsed input: request heads (bodies are scanned, not kept)
        self._head: bytes | None = None
        self._need = 0  # Content-Length of the current request
        self._have = 0  # body bytes received so far
        self._stream = False  # the body says "stream": true
        self._tail = b""  # last bytes of the previous body chunk (a key may straddle chunks)
        self._busy = False
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None

    def data_received(self, data: bytes) -> None:
        if self._head is not None and self._have < self._need and not self._buf:
            data = self._take_body(data)
        if data:
            self._buf += data
        if not self._busy:
            self._process()

    def _take_body(self, data: bytes) -> bytes:
        """Scan (not store) the body part of `data`; returns what follows the body."""
        room = self._need - self._have
        part, rest = (data, b"") if len(data) <= room else (data[:room], data[room:])
        if not self._stream:
            self._stream = wants_stream(part) or wants_stream(self._tail + part[:24])
        self._tail = part[-24:]
        self._have += len(part)
        return rest

    def _process(self) -> None:
        while self._transport is not None and not self._busy:
            if self._head is None:
                end = self._buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                self._head = bytes(self._buf[:end]).lower()
                self._need, self._have = _content_length(self._head), 0
                self._stream, self._tail = False, b""
                rest = bytes(self._buf[end + 4 :])
                self._buf = bytearray(self._take_body(rest))
            if self._have < self._need:
                return
            head, self._head = self._head, None
            self._respond(head, self._stream)

    def _respond(self, head: bytes, stream: bool) -> None:
        transport = self._transport
        assert transport is not None
        close = b"\r\nconnection: close" in head
        tail = b"Connection: close\r\n\r\n" if close else b"\r\n"
        if head.startswith(b"post") and stream:
            self._busy = True
            transport.write(SSE_HEAD + tail + self._frames[0])
            asyncio.get_running_loop().create_task(self._stream_answer(close))
            return
        answer = COMPLETION if head.startswith(b"post") else HEALTH
        transport.write(JSON_HEAD % len(answer) + tail + answer)
        if close:
            transport.close()

    async def _stream_answer(self, close: bool) -> None:
        for frame in self._frames[1:]:
            if self._interval:
                await asyncio.sleep(self._interval)
            if self._transport is None:
                return
            self._transport.write(frame)
        self._busy = False
        if close:
            self._transport.close()
        else:
            self._process()


def _content_length(head: bytes) -> int:
    at = head.find(b"\r\ncontent-length:")
    if at < 0:
        return 0
    end = head.find(b"\r\n", at + 2)
    return int(head[at + 17 : end if end >= 0 else None])


async def serve(host: str, port: int, chunks: int, interval_ms: float) -> None:
    loop = asyncio.get_running_loop()
    frames = sse_frames(chunks)
    server = await loop.create_server(
        lambda: MockProtocol(frames, interval_ms / 1000), host, port, backlog=4096
    )
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"mock upstream listening on http://{host}:{port}", flush=True)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--chunks", type=int, default=16, help="content chunks per SSE answer")
    parser.add_argument("--interval-ms", type=float, default=1.0, help="gap between SSE chunks")
    args = parser.parse_args()
    coro = serve(args.host, args.port, args.chunks, args.interval_ms)
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


if __name__ == "__main__":
    main()
