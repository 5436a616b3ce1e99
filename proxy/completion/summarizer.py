"""The summarizer through the `Upstream` seam: one non-streamed chat completion per batch.

Built per request at the edge (`UpstreamSummarizer.for_request`): by default the upstream that
serves the request, with the headers (the tenant's credentials) its completion gets, and the
request's model; a policy may name another model, or another upstream by name (whose
credentials are then the tenant's for that upstream). Every failure is a `SummarizerError`:
transport, a non-200 status, an answer that is not JSON or has no text, an answer too large.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from multidict import CIMultiDict

from proxy.engine.summarizer import SummarizerError, SummaryCall, SummaryReply
from proxy.errors import ProxyError
from proxy.formats.openai_chat.summary import summary_answer, summary_request
from proxy.jsonio import dumps, loads
from proxy.upstream.base import Upstream

MAX_ANSWER_BYTES = 4 * 1024 * 1024

HeadersFor = Callable[[Upstream], CIMultiDict[str]]
"""The headers a summarizer call to an upstream carries (the tenant's credentials for it)."""


@dataclass(frozen=True)
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
        prompt = _prompt(call)
        body = dumps(summary_request(model, call.instructions, prompt, call.max_tokens))
        headers = self.headers_for(upstream)
        headers["Content-Type"] = "application/json"
        try:
            response = await upstream.chat_completions(headers=headers, body=body)
            try:
                status, raw = response.status, await response.read()
            finally:
                response.close()
        except ProxyError as error:  # UpstreamError: transport, timeouts
            failed = f"the summarizer's upstream failed: {error}"
            raise SummarizerError("upstream", failed) from None
        if status != 200:
            raise SummarizerError("upstream", f"the summarizer's upstream answered {status}")
        if len(raw) > MAX_ANSWER_BYTES:
            raise SummarizerError("invalid", "the summarizer's answer is too large")
        try:
            found = summary_answer(loads(raw))
        except ProxyError:
            found = None
        if found is None:
            raise SummarizerError("invalid", "the summarizer's answer has no text")
        answer, answered_by, usage = found
        return SummaryReply(answer, answered_by or model, usage)


def _prompt(call: SummaryCall) -> str:
    previous = f"Previous summary (JSON-rendered):\n{call.previous}\n\n" if call.previous else ""
    return f"{previous}Turns to fold in:\n{call.transcript}"
