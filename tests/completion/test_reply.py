"""`relayed`: a stream relayed as it is that breaks hands its last bytes to the error event."""

from __future__ import annotations

from typing import Any

from upstream_double import FakeUpstream, broken, sse_answer

from proxy.completion.reply import TAIL_BYTES, relayed
from proxy.errors import ProxyError


async def relayed_tail(chunks: list[bytes]) -> tuple[bytes, bytes]:
    """(what the client got, the tail the error event was given) for a stream that breaks."""
    seen: list[bytes] = []

    def error_event(error: ProxyError, request_id: str, tail: bytes) -> bytes:
        seen.append(tail)
        return b"ERROR"

    upstream = FakeUpstream(sse_answer(chunks, done=False, error=broken()))
    answer: Any = await upstream.chat_completions(headers={}, body=b"{}")
    reply = await relayed(answer, {}, "req_1", error_event)
    assert reply.stream is not None
    sent = b"".join([chunk async for chunk in reply.stream])
    return sent, seen[0]


async def test_the_error_event_gets_the_last_bytes_relayed() -> None:
    sent, tail = await relayed_tail([b"data: 1\n\n", b"data: 2\n\n"])
    assert sent == b"data: 1\n\ndata: 2\n\nERROR" and tail == b"data: 1\n\ndata: 2\n\n"


async def test_the_tail_is_bounded_but_never_shorter_than_its_size() -> None:
    chunks = [bytes([65 + k % 26]) * 1000 for k in range(300)]
    sent, tail = await relayed_tail(chunks)
    whole = b"".join(chunks)
    assert sent == whole + b"ERROR"
    assert TAIL_BYTES <= len(tail) < TAIL_BYTES + 1000 and whole.endswith(tail)
