"""The summarizer through the `Upstream` seam: one non-streamed completion per batch.

Built per request at the edge (`UpstreamSummarizer.for_request`): by default the upstream that
serves the request, with the headers (the tenant's credentials) its completion gets, and the
request's model; a policy may name another model, or another upstream by name (whose
credentials are then the tenant's for that upstream). The answer is asked for as structured
output in `SummaryShape`'s JSON schema; an upstream that refuses the request (400, 422, or 500:
llama-cpp-python's server answers an unknown `response_format` with a 500; most often one that
does not know that form of `response_format`) is asked again in the next form
(`STRUCTURED_FORMS`), then without any, for this call only (nothing is remembered). Every
failure is a `SummarizerError`: transport, a non-200 status, an answer that is not JSON or has
no text, an answer too large. An upstream of kind `anthropic` is asked in Anthropic Messages
(`/messages`, the instructions as the system prompt, no structured output: Messages has no
`response_format`); every other kind in Chat Completions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict

from proxy.engine.summarizer import (
    SCHEMA_NAME,
    SummarizerError,
    SummaryCall,
    SummaryReply,
    SummaryShape,
)
from proxy.errors import ProxyError
from proxy.formats.anthropic_messages import summary as messages_summary
from proxy.formats.openai_chat.summary import STRUCTURED_FORMS, summary_answer, summary_request
from proxy.jsonio import dumps, loads
from proxy.upstream.base import (
    CHAT_COMPLETIONS_ROUTE,
    MESSAGES_ROUTE,
    Upstream,
    read_at_most,
)

MAX_ANSWER_BYTES = 4 * 1024 * 1024
REFUSED = frozenset({400, 422, 500})
"""Statuses after which the call is made again, in the next form of `response_format` (a 500
too: seen from llama-cpp-python's server for a form it does not know)."""

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
        asked = (model, call.instructions, _prompt(call), call.max_tokens)
        headers = self.headers_for(upstream)
        headers["Content-Type"] = "application/json"
        wire = _wire(upstream)
        for body in wire.bodies(*asked):
            status, raw = await _post(upstream, headers, dumps(body), wire.route)
            if status not in REFUSED:
                break
        if status != 200:
            raise SummarizerError("upstream", f"the summarizer's upstream answered {status}")
        if len(raw) > MAX_ANSWER_BYTES:
            raise SummarizerError("invalid", "the summarizer's answer is too large")
        try:
            found = wire.answer(loads(raw))
        except ProxyError:
            found = None
        if found is None:
            raise SummarizerError("invalid", "the summarizer's answer has no text")
        answer, answered_by, usage = found
        return SummaryReply(answer, answered_by or model, usage)


@dataclass(frozen=True)
class _Wire:
    """How a summarizer call is spoken to one kind of upstream."""

    bodies: Callable[[str, str, str, int], list[dict[str, Any]]]
    """The request bodies to try in order, for (model, instructions, prompt, max_tokens)."""
    answer: Callable[[Any], tuple[str, str, dict[str, int]] | None]
    route: str


def _chat_bodies(model: str, instructions: str, prompt: str, limit: int) -> list[dict[str, Any]]:
    """The structured forms in order, then none."""
    asked = (model, instructions, prompt, limit)
    schema = SummaryShape.model_json_schema()
    structured = [
        summary_request(*asked, schema=schema, schema_name=SCHEMA_NAME, form=form)
        for form in STRUCTURED_FORMS
    ]
    return [*structured, summary_request(*asked)]


def _messages_bodies(
    model: str, instructions: str, prompt: str, limit: int
) -> list[dict[str, Any]]:
    return [messages_summary.summary_request(model, instructions, prompt, limit)]


CHAT = _Wire(_chat_bodies, summary_answer, CHAT_COMPLETIONS_ROUTE)
MESSAGES = _Wire(_messages_bodies, messages_summary.summary_answer, MESSAGES_ROUTE)


def _wire(upstream: Upstream) -> _Wire:
    """Anthropic Messages for an upstream of kind `anthropic` (which may serve nothing else),
    Chat Completions for every other kind (OpenAI-compatible servers, litellm)."""
    return MESSAGES if upstream.settings.kind == "anthropic" else CHAT


async def _post(
    upstream: Upstream, headers: CIMultiDict[str], body: bytes, route: str
) -> tuple[int, bytes]:
    """The status and body of one call (a transport error or timeout is a failure)."""
    try:
        response = await upstream.chat_completions(headers=headers, body=body, route=route)
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
