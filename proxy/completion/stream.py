"""The streaming synthetic-tool loop: several upstream rounds, one client stream.

Each upstream round is parsed incrementally (`proxy.formats.sse.SSEParser`) and rewritten by one
`StreamFilter`: text deltas are written to the client as soon as their TCP chunk arrives, synthetic
tool calls are held back, client calls pass with contiguous indices. A round that ends with
synthetic calls only (and may loop) is executed and the upstream called again with `stream: true`;
its chunks continue the same client stream. The client sees exactly one `data: [DONE]` and, when
any round reported usage, one summed usage chunk right before it.

The response headers go out before the first round is read, so a stream cannot carry
`x-ctxproxy-synthetic-rounds` / `x-ctxproxy-artifact-reads`; the counts are logged (one INFO line
per request, `ctxproxy.synthetic`). Once the stream has started, an upstream error or a broken
upstream stream becomes one SSE `data: {"error": ...}` event, and the stream ends without
`[DONE]`. When the client goes away, the current upstream response is closed and nothing else runs.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping

import aiohttp
from aiohttp import web

from proxy.completion.rounds import SyntheticRounds
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.sse import DONE, SSEEvent, SSEParser, StreamFilter, encode_data, encode_event
from proxy.http.middleware import REQUEST_ID_HEADER, error_event
from proxy.http.relay import is_event_stream
from proxy.http.services import REQUEST_ID
from proxy.jsonio import dumps, loads
from proxy.upstream.openai_http import relay_response_headers, upstream_read_error

_DONE_EVENT = encode_data(DONE)


class _End(enum.Enum):
    finished = "finished"
    """The round's stream ended normally."""
    stopped = "stopped"
    """An error was written to the client, or the client is gone: nothing more to send."""


async def stream_rounds(
    rounds: SyntheticRounds, first: aiohttp.ClientResponse, extra_headers: Mapping[str, str]
) -> web.StreamResponse:
    """Serve the client stream from `first` and the rounds after it (every response is closed)."""
    request = rounds.request
    answer: aiohttp.ClientResponse | None = first
    try:
        headers = relay_response_headers(first.headers)
        headers.update(extra_headers)
        headers[REQUEST_ID_HEADER] = request[REQUEST_ID]
        response = web.StreamResponse(status=200, headers=headers)
        await response.prepare(request)
        stream = StreamFilter()
        while answer is not None:
            stream.start_round(rounds.loop_allowed)
            end = await _pump(rounds, response, answer, stream)
            answer.close()
            if end is _End.stopped:
                return response
            pending = stream.pending_calls()
            if pending is None:
                answer = None
                break
            content, calls = pending
            await rounds.execute(content, [call.as_tool_call() for call in calls])
            answer = await _open_next(rounds, response)
            if answer is None:
                return response
        usage = stream.usage_chunk()
        tail = (encode_data(dumps(usage)) if usage is not None else b"") + _DONE_EVENT
        if await _write(response, tail):
            await response.write_eof()
        return response
    finally:
        if answer is not None:
            answer.close()


async def _pump(
    rounds: SyntheticRounds,
    response: web.StreamResponse,
    answer: aiohttp.ClientResponse,
    stream: StreamFilter,
) -> _End:
    """Relay one upstream round through the filter, one client write per upstream TCP chunk."""
    parser = SSEParser()
    chunks = answer.content.iter_any().__aiter__()
    while True:
        try:
            events = parser.feed(await chunks.__anext__())
        except StopAsyncIteration:
            events = parser.close()
            out, failed = _render(events, stream)
            return _End.finished if await _write(response, out) and not failed else _End.stopped
        except (aiohttp.ClientError, TimeoutError, asyncio.IncompleteReadError) as exc:
            error = upstream_read_error(exc, rounds.upstream.name)
            await _write(response, error_event(error, rounds.request[REQUEST_ID]))
            return _End.stopped
        out, failed = _render(events, stream)
        if not await _write(response, out) or failed:
            return _End.stopped


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


async def _open_next(
    rounds: SyntheticRounds, response: web.StreamResponse
) -> aiohttp.ClientResponse | None:
    """The next round's response, or None after writing why there is none to the client."""
    request_id = rounds.request[REQUEST_ID]
    try:
        answer = await rounds.open(rounds.next_body())
    except ProxyError as exc:
        await _write(response, error_event(exc, request_id))
        return None
    if answer.status == 200 and is_event_stream(answer):
        return answer
    try:
        body = await answer.read()
    except (aiohttp.ClientError, TimeoutError, asyncio.IncompleteReadError):
        body = b""
    finally:
        answer.close()
    await _write(response, _answer_error(answer.status, body, rounds.upstream.name, request_id))
    return None


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


async def _write(response: web.StreamResponse, data: bytes) -> bool:
    """Write to the client; False when the client has gone."""
    if not data:
        return True
    try:
        await response.write(data)
    except ConnectionResetError:
        return False
    return True
