"""The streaming synthetic-tool loop: several upstream rounds, one client stream.

Each upstream round is parsed incrementally (`proxy.formats.sse.SSEParser`) and rewritten by the
format's one `AnswerStream` (`ClientFormat.stream_filter`): text is yielded to the client as soon as
its TCP chunk arrives, synthetic tool calls are held back, client calls pass. A round that ends
with synthetic calls only (and may loop) is executed and the upstream called again, streaming; its
events continue the same client stream, which ends once (`AnswerStream.closing`: the summed usage,
the done marker).

The response headers go out before the first round is read, so a stream cannot carry
`x-ctxproxy-synthetic-rounds` / `x-ctxproxy-artifact-reads`; the counts are logged (one INFO line
per request, `ctxproxy.synthetic`) when the stream is closed. Once the stream has started, an
upstream error or a broken upstream stream becomes one error event (`ClientFormat.error_event`,
numbered by `AnswerStream.error`), and the stream ends without its done marker; so does a stream
whose upstream ended it before its final event (`AnswerStream.missing_end`). When the client
goes away the writer closes the stream: the current upstream response is closed and nothing else
runs.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping

from proxy.completion.reply import CappedChunks, ChunkStream, Reply, read_capped
from proxy.completion.rounds import SyntheticRounds
from proxy.completion.usage_tap import UsageTap
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.sse import SSEParser
from proxy.upstream.base import UpstreamResponse
from proxy.upstream.headers import relay_response_headers


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
    wire = rounds.wire
    stream = wire.stream_filter(rounds.names)
    tap = UsageTap(wire, rounds.stats)
    try:
        while answer is not None:
            stream.start_round(rounds.loop_allowed)
            tap.next_round()
            parser = SSEParser()
            chunks = CappedChunks(answer, rounds.max_answer_bytes, rounds.upstream.name)
            try:
                async for chunk in chunks:  # the parser holds at most one round's bytes
                    tap(chunk)
                    out, failed = stream.render(parser.feed(chunk))
                    if out:
                        yield out
                    if failed:
                        return
            except ProxyError as exc:  # broken, or more than one round may hold
                yield stream.error(wire.error_event(exc, rounds.request_id))
                return
            out, failed = stream.render(parser.close())
            if out:
                yield out
            if failed:
                return
            answer.close()
            pending = stream.pending_round()
            if pending is None:
                break
            await rounds.execute(*pending)
            answer, failure = await _open_next(rounds)
            if answer is None:
                yield stream.error(failure)
                return
        if stream.missing_end():
            yield stream.error(wire.error_event(_cut_short(rounds), rounds.request_id))
            return
        mixed = stream.mixed_synthetic_calls() if rounds.loop_allowed else []
        if mixed:  # the client got its own calls; the proxy's are executed and kept all the same
            await rounds.execute(stream.mixed_content(), mixed)
        await rounds.keep()
        yield stream.closing()
    finally:
        if answer is not None:
            answer.close()


async def _open_next(rounds: SyntheticRounds) -> tuple[UpstreamResponse | None, bytes]:
    """The next round's streaming response, or None and the error event saying why there is none."""
    try:
        answer = await rounds.open(await rounds.next_body())
    except ProxyError as exc:
        return None, rounds.wire.error_event(exc, rounds.request_id)
    if answer.status == 200 and answer.is_event_stream:
        return answer, b""
    try:
        body = await read_capped(answer, rounds.max_answer_bytes, rounds.upstream.name)
    except ProxyError:  # broken or too large: the status says what went wrong
        body = b""
    return None, _answer_error(rounds, answer.status, body)


def _cut_short(rounds: SyntheticRounds) -> ProxyError:
    return ProxyError(
        ErrorCode.upstream_invalid_response,
        f"Upstream {rounds.upstream.name!r} ended its stream before the response was complete",
    )


def _answer_error(rounds: SyntheticRounds, status: int, body: bytes) -> bytes:
    """An upstream error answer as an error event: its own envelope when it sent one."""
    own = rounds.wire.upstream_error_event(body)
    if own is not None:
        return own
    name = rounds.upstream.name
    if status == 200:
        error = ProxyError(
            ErrorCode.upstream_invalid_response,
            f"Upstream {name!r} did not stream a follow-up round",
        )
    else:
        error = ProxyError(
            ErrorCode.upstream_unavailable, f"Upstream {name!r} answered HTTP {status}"
        )
    return rounds.wire.error_event(error, rounds.request_id)
