"""One chat completion end to end: prepared request -> upstream -> resolve synthetic calls -> reply.

Without synthetic tools in the prepared request the upstream answer is relayed byte for byte
(`proxy.completion.reply.relayed`). With them, the proxy runs the read-tool loop itself: a round
whose only tool calls are synthetic is executed and the upstream asked again, up to the policy's
`max_rounds`; the client gets one ordinary answer with `usage` summed over the rounds and the
synthetic calls removed. Non-streaming answers carry `x-ctxproxy-synthetic-rounds` and
`x-ctxproxy-artifact-reads`; streams (`proxy.completion.stream`) cannot, and every request with
synthetic tools logs one INFO line with both counts instead.

When the upstream's first answer says the prompt is too long and states the model's window, the
request is prepared once more against that window and sent again, once (`completion.retry`).

Nothing here knows the HTTP server nor a wire format: the caller hands in a `CompletionContext`
(with the client's `ClientFormat`) and writes the `Reply` it gets back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict

from proxy.artifacts.store import ArtifactStore
from proxy.completion.reply import Reply, read_capped, relayed
from proxy.completion.retry import PrepareAgain, checked_first_answer
from proxy.completion.round_fit import Refit
from proxy.completion.rounds import SyntheticRounds
from proxy.completion.stream import stream_rounds
from proxy.completion.usage_headers import usage_headers
from proxy.completion.usage_tap import UsageTap
from proxy.engine.manifest import Prepared
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.base import ClientFormat
from proxy.jsonio import dumps, loads
from proxy.metrics import Metrics
from proxy.settings import MAX_PARSED_RESPONSE_BYTES
from proxy.stats import RequestStats
from proxy.synthetic.base import SearchWorker
from proxy.tokens.calibration import CountCalibration
from proxy.tokens.calibration_rule import CalibrationKey
from proxy.upstream.base import Upstream, UpstreamResponse
from proxy.upstream.headers import relay_response_headers


@dataclass(slots=True)  # one per request: plain stores, not frozen setattrs
class CompletionContext:
    """Everything one completion needs from its caller."""

    upstream: Upstream
    headers: CIMultiDict[str]
    """The headers to send upstream, the credentials already decided."""
    scope: str
    """The artifact scope the synthetic tools read from."""
    store: ArtifactStore
    metrics: Metrics
    stats: RequestStats
    """Filled in as the completion goes: upstream timings, synthetic rounds and reads."""
    request_id: str
    wire: ClientFormat
    """The client's wire format (both sides: request and answer)."""
    max_parsed_response_bytes: int = MAX_PARSED_RESPONSE_BYTES
    """The most the proxy reads of one upstream answer it must parse (a synthetic round)."""
    search_worker: SearchWorker | None = None
    """The app's thread for large searches (asyncio's default executor when None)."""
    refit: Refit | None = None
    """Prepares the synthetic loop's follow-up calls within the request's allowance."""
    prepare_again: PrepareAgain | None = None
    """Prepares the request against the window an upstream's overflow error stated (one retry)."""
    calibration: CountCalibration | None = None
    """Fed with the prompt tokens the upstream reports in a whole JSON answer (not streams)."""
    contributor: str = ""
    """Whose samples those are (`Requester.contributor`; "": nobody's, nothing learned)."""


async def run_completion(context: CompletionContext, prepared: Prepared) -> Reply:
    """Send the prepared request upstream and describe the answer; refusals happened before."""
    return await _attempt(context, prepared, context.prepare_again)


async def _attempt(
    context: CompletionContext, prepared: Prepared, prepare_again: PrepareAgain | None
) -> Reply:
    """One attempt; with `prepare_again`, an overflow answer may lead to one more (without)."""
    headers = CIMultiDict(context.headers)
    headers["Content-Type"] = "application/json"
    if prepared.synthetic is None:
        return await _relayed_attempt(context, prepared, headers, prepare_again)
    return await _rounds_attempt(context, prepared, headers, prepare_again)


async def _relayed_attempt(
    context: CompletionContext,
    prepared: Prepared,
    headers: CIMultiDict[str],
    prepare_again: PrepareAgain | None,
) -> Reply:
    """Without synthetic tools: the upstream's answer is relayed as it comes."""
    wire = context.wire
    first = await context.upstream.send(
        headers=headers, body=prepared.body, timer=context.stats, route=wire.upstream_route
    )
    answer = await checked_first_answer(first, prepare_again)
    if isinstance(answer, Prepared):
        return await _attempt(context, answer, None)
    tap = UsageTap(wire, context.stats)
    reply = await relayed(
        answer, prepared.headers(), context.request_id, wire.relayed_error_event, tap
    )
    if reply.status == 200 and reply.body is not None and not answer.is_event_stream:
        payload = _json_object(reply.body)
        _observe_usage(context, prepared, payload)
        if payload is not None:
            _count_usage(context.stats, wire, payload)
            reply.headers.update(usage_headers(context.stats))
    return reply


async def _rounds_attempt(
    context: CompletionContext,
    prepared: Prepared,
    headers: CIMultiDict[str],
    prepare_again: PrepareAgain | None,
) -> Reply:
    """With synthetic tools: the proxy's read rounds run until the answer is the client's."""
    rounds = _rounds(context, prepared, headers)
    streaming = False
    again: Prepared | None = None
    try:
        checked = await checked_first_answer(
            await rounds.open(rounds.first_body(prepared.body)), prepare_again
        )
        if isinstance(checked, Prepared):
            again = checked
            return await _attempt(context, again, None)
        answer = checked
        streaming = (
            context.wire.stream(prepared.parsed)
            and answer.status == 200
            and answer.is_event_stream
        )
        if streaming:  # the stream logs the outcome when it is closed
            return stream_rounds(rounds, answer, prepared.headers())

        def first_round(payload: dict[str, Any]) -> None:
            _observe_usage(context, prepared, payload)

        return await complete_json(rounds, answer, prepared.headers(), first_round)
    finally:
        if not streaming and again is None:  # a retry logs its own outcome
            rounds.log_outcome()


def _rounds(
    context: CompletionContext, prepared: Prepared, headers: CIMultiDict[str]
) -> SyntheticRounds:
    assert prepared.synthetic is not None
    return SyntheticRounds(
        context.upstream,
        headers,
        context.store,
        context.scope,
        prepared.synthetic,
        prepared.parsed,
        context.metrics,
        context.stats,
        context.request_id,
        context.wire,
        max_answer_bytes=context.max_parsed_response_bytes,
        search_worker=context.search_worker,
        refit=context.refit,
        working_set=prepared.working_set,
    )


async def complete_json(
    rounds: SyntheticRounds,
    answer: UpstreamResponse,
    extra_headers: Mapping[str, str],
    first_round: Callable[[dict[str, Any]], None] | None = None,
) -> Reply:
    """The non-streaming loop; `answer` (the first round's response) is always closed.
    `first_round` sees the first round's answer (the prepared request's own usage)."""
    wire = rounds.wire
    usage: dict[str, Any] | None = None
    while True:
        if answer.status != 200:
            extra = {**extra_headers, **rounds.response_headers()}
            return await relayed(answer, extra, rounds.request_id, wire.relayed_error_event)
        raw = await read_capped(answer, rounds.max_answer_bytes, rounds.upstream.name)
        payload = _parse_completion(raw, rounds.upstream.name)
        if first_round is not None and rounds.rounds == 0:
            first_round(payload)
        usage = wire.add_usage(usage, wire.answer_usage(payload))
        _count_usage(rounds.stats, wire, payload)
        pending = wire.synthetic_only(payload, rounds.names) if rounds.loop_allowed else None
        if pending is None:
            break
        await rounds.execute(*pending)
        answer = await rounds.open(await rounds.next_body())
    mixed = wire.synthetic_calls(payload, rounds.names) if rounds.loop_allowed else []
    if mixed:  # the client gets its own calls; the proxy's are executed and kept all the same
        await rounds.execute(wire.mixed_content(payload, rounds.names), mixed)
    await rounds.keep()
    headers = relay_response_headers(answer.headers)
    headers.update(extra_headers)
    headers.update(rounds.response_headers())
    headers.update(usage_headers(rounds.stats))
    if wire.strip_synthetic_calls(payload, rounds.names) or rounds.rounds:
        if usage is not None:
            wire.with_usage(payload, usage)
        raw = dumps(payload)
    return Reply(200, headers, body=raw)


def _count_usage(stats: RequestStats, wire: ClientFormat, payload: dict[str, Any]) -> None:
    """One whole answer's usage, in the stats (its cost, the access line, the metrics)."""
    usage = wire.token_usage(wire.answer_usage(payload))
    if usage is not None:
        stats.answers.append(usage)


def _observe_usage(
    context: CompletionContext, prepared: Prepared, payload: dict[str, Any] | None
) -> None:
    """Feed the calibration with the prompt tokens the upstream reports for the prepared body."""
    manifest = prepared.manifest
    if context.calibration is None or payload is None or not manifest.counting_method:
        return
    wire = context.wire
    reported = wire.prompt_tokens(wire.answer_usage(payload))
    key = CalibrationKey(context.upstream.name, manifest.model)
    context.calibration.observe(key, context.contributor, manifest.tokens_after, reported)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        payload = loads(raw)
    except ProxyError:
        return None
    return payload if isinstance(payload, dict) else None


def _parse_completion(raw: bytes, name: str) -> dict[str, Any]:
    try:
        payload = loads(raw)
    except ProxyError:
        payload = None
    if not isinstance(payload, dict):
        raise ProxyError(
            ErrorCode.upstream_invalid_response,
            f"Upstream {name!r} answered with something that is not a JSON completion",
        )
    return payload
