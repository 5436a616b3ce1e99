"""The summarizer through the `Upstream` seam: one non-streamed completion per batch.

Built per request by the driver: by default the upstream that serves the request, with the headers
(the tenant's credentials) its completion gets, and the request's model; a policy may name another
model, or another upstream by name (whose credentials are then the tenant's for that upstream). The
call is made in the format the upstream speaks natively (`Upstream.native_format`), which writes its
bodies and reads its answer (`ClientFormat.summary_bodies` / `summary_answer`): in Chat Completions
the answer is asked for as structured output in `SummaryShape`'s JSON schema, and an upstream that
refuses a body (400, 422, or 500: llama-cpp-python's server answers an unknown `response_format`
with a 500) is asked again with the next one, for this call only (nothing is remembered); in
Messages once, without structured output. Every failure is a `SummarizerError`: transport, a non-200
status, an answer that is not JSON or has no text, an answer too large.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from multidict import CIMultiDict

from proxy.engine.steps.summarize.summarizer import SummarizerError, SummaryCall, SummaryReply
from proxy.errors import ProxyError
from proxy.formats import FORMATS
from proxy.jsonio import dumps, loads
from proxy.upstream.base import Upstream, read_at_most

MAX_ANSWER_BYTES = 4 * 1024 * 1024
REFUSED = frozenset({400, 422, 500})
"""Statuses after which the call is made again, in the next form of `response_format` (a 500
too: seen from llama-cpp-python's server for a form it does not know)."""

HeadersFor = Callable[[Upstream], CIMultiDict[str]]
"""The headers a summarizer call to an upstream carries (the tenant's credentials for it)."""


@dataclass(slots=True)  # one per request: plain stores, not frozen setattrs
class UpstreamSummarizer:
    route: Upstream
    """The upstream serving the request (the default)."""
    upstreams: Mapping[str, Upstream]
    """Every configured upstream, by name (a policy's `summarizer.upstream`)."""
    headers_for: HeadersFor
    model: str
    """The request's model (the default)."""

    async def summarize(self, call: SummaryCall) -> SummaryReply:
        upstream = self.route if call.upstream is None else self.upstreams.get(call.upstream)
        if upstream is None:
            raise SummarizerError("upstream", f"no upstream named {call.upstream!r}")
        model = call.model or self.model
        asked = (model, call.instructions, _prompt(call), call.max_tokens)
        headers = self.headers_for(upstream)
        headers["Content-Type"] = "application/json"
        form = FORMATS[upstream.native_format]
        for body in form.summary_bodies(*asked):
            status, raw = await _post(upstream, headers, dumps(body), form.upstream_route)
            if status not in REFUSED:
                break
        if status != 200:
            raise SummarizerError("upstream", f"the summarizer's upstream answered {status}")
        if len(raw) > MAX_ANSWER_BYTES:
            raise SummarizerError("invalid", "the summarizer's answer is too large")
        try:
            found = form.summary_answer(loads(raw))
        except ProxyError:
            found = None
        if found is None:
            raise SummarizerError("invalid", "the summarizer's answer has no text")
        answer, answered_by, usage = found
        return SummaryReply(answer, answered_by or model, usage)


async def _post(
    upstream: Upstream, headers: CIMultiDict[str], body: bytes, route: str
) -> tuple[int, bytes]:
    """The status and body of one call (a transport error or timeout is a failure)."""
    try:
        response = await upstream.send(headers=headers, body=body, route=route)
        try:
            return response.status, await read_at_most(response, MAX_ANSWER_BYTES)
        finally:
            response.close()
    except ProxyError as error:  # UpstreamError: transport, timeouts
        failed = f"the summarizer's upstream failed: {error}"
        raise SummarizerError("upstream", failed) from None


def _prompt(call: SummaryCall) -> str:
    previous = f"Previous summary (JSON-rendered):\n{call.previous}\n\n" if call.previous else ""
    return f"{previous}Turns to fold in:\n{call.transcript}"
