"""The streaming synthetic-tool loop: several upstream rounds, one client stream.

Each upstream round is parsed incrementally (`proxy.formats.sse.SSEParser`) and rewritten by one
`StreamFilter`: text deltas are yielded to the client as soon as their TCP chunk arrives,
synthetic tool calls are held back, client calls pass with contiguous indices. A round that ends
with synthetic calls only (and may loop) is executed and the upstream called again with
`stream: true`; its chunks continue the same client stream. The client sees exactly one
`data: [DONE]` and, when any round reported usage, one summed usage chunk right before it.

The response headers go out before the first round is read, so a stream cannot carry
`x-ctxproxy-synthetic-rounds` / `x-ctxproxy-artifact-reads`; the counts are logged (one INFO line
per request, `ctxproxy.synthetic`) when the stream is closed. Once the stream has started, an
upstream error or a broken upstream stream becomes one SSE `data: {"error": ...}` event, and the
stream ends without `[DONE]`. When the client goes away the writer closes the stream: the current
upstream response is closed and nothing else runs.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping

from proxy.completion.reply import CappedChunks, ChunkStream, Reply, read_capped
from proxy.completion.rounds import SyntheticRounds
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_chat_errors import error_event
from proxy.formats.sse import DONE, SSEEvent, SSEParser, StreamFilter, encode_data, encode_event
from proxy.jsonio import dumps, loads
from proxy.upstream.base import UpstreamResponse
from proxy.upstream.headers import relay_response_headers

_DONE_EVENT = encode_data(DONE)


def stream_rounds(
    rounds: SyntheticRounds, first: UpstreamResponse, extra_headers: Mapping[str, str]
) -> Reply:
    """The client stream served from `first` and the rounds after it (every response is closed
    by the time the stream is)."""
    headers = relay_response_headers(first.headers)
    headers.update(extra_headers)

    def on_close() -> None:
        first.close()  # when the stream never started; closing twice is harmless
        rounds.log_outcome()

    return Reply(200, headers, stream=ChunkStream(_serve(rounds, first), on_close))


async def _serve(rounds: SyntheticRounds, first: UpstreamResponse) -> AsyncGenerator[bytes, None]:
    """One client write per upstream TCP chunk (none when a chunk holds nothing for the client)."""
    answer: UpstreamResponse | None = first
    stream = StreamFilter(rounds.names)
    try:
        while answer is not None:
            stream.start_round(rounds.loop_allowed)
            parser = SSEParser()
            chunks = CappedChunks(answer, rounds.max_answer_bytes, rounds.upstream.name)
            try:
                async for chunk in chunks:  # the parser holds at most one round's bytes
                    out, failed = _render(parser.feed(chunk), stream)
                    if out:
                        yield out
                    if failed:
                        return
            except ProxyError as exc:  # broken, or more than one round may hold
                yield error_event(exc, rounds.request_id)
                return
            out, failed = _render(parser.close(), stream)
            if out:
                yield out
            if failed:
                return
            answer.close()
            pending = stream.pending_calls()
            if pending is None:
                break
            content, calls = pending
            await rounds.execute(content, [call.as_tool_call() for call in calls])
            answer, failure = await _open_next(rounds)
            if answer is None:
                yield failure
                return
        usage = stream.usage_chunk()
        yield (encode_data(dumps(usage)) if usage is not None else b"") + _DONE_EVENT
    finally:
        if answer is not None:
            answer.close()


def _render(events: list[SSEEvent], stream: StreamFilter) -> tuple[bytes, bool]:
    """What the client gets for these events, and whether one of them was an error."""
    out: list[bytes] = []
    failed = False
    for event in events:
        if event.data == DONE:
            continue
        try:
            chunk = loads(event.data)
        except ProxyError:
            chunk = None
        if isinstance(chunk, dict) and ("choices" in chunk or "usage" in chunk):
            forwarded = stream.process(chunk)
            if forwarded is not None:
                out.append(encode_data(dumps(forwarded)))
            continue
        # Anything else (an error event above all) goes out as it came.
        out.append(encode_event(event))
        failed = failed or (isinstance(chunk, dict) and "error" in chunk)
    return b"".join(out), failed


async def _open_next(rounds: SyntheticRounds) -> tuple[UpstreamResponse | None, bytes]:
    """The next round's streaming response, or None and the error event saying why there is none."""
    try:
        answer = await rounds.open(rounds.next_body())
    except ProxyError as exc:
        return None, error_event(exc, rounds.request_id)
    if answer.status == 200 and answer.is_event_stream:
        return answer, b""
    try:
        body = await read_capped(answer, rounds.max_answer_bytes, rounds.upstream.name)
    except ProxyError:  # broken or too large: the status says what went wrong
        body = b""
    return None, _answer_error(answer.status, body, rounds.upstream.name, rounds.request_id)


def _answer_error(status: int, body: bytes, name: str, request_id: str) -> bytes:
    """An upstream error answer as an SSE event: its own envelope when it sent one."""
    try:
        payload = loads(body)
    except ProxyError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        return encode_data(dumps(payload))
    if status == 200:
        error = ProxyError(
            ErrorCode.upstream_invalid_response,
            f"Upstream {name!r} did not stream a follow-up round",
        )
    else:
        error = ProxyError(
            ErrorCode.upstream_unavailable, f"Upstream {name!r} answered HTTP {status}"
        )
    return error_event(error, request_id)

