"""The `litellm` upstream kind: any provider litellm supports (Gemini, Bedrock, Vertex, Azure,
Anthropic, Ollama, vLLM, ...), for clients in the OpenAI Chat Completions format and, crossing
formats, for Anthropic Messages clients (Claude Code on an OpenAI-compatible model): those go
through litellm's Messages interface (`litellm.anthropic.messages.acreate`), which answers in
Anthropic's format, whole or as Anthropic events.

A prepared chat completion (OpenAI JSON) is handed to `litellm.acompletion` with the model
`<provider>/<model>`, the upstream's optional `base_url` as `api_base` and the request's key
(`Authorization: Bearer`, else `x-api-key`) as `api_key`; the answer comes back in OpenAI's
shape: a whole `chat.completion`, or the stream translated chunk by chunk into OpenAI SSE
(`data: {chunk}` ... `data: [DONE]`). litellm's errors become OpenAI error answers with the
provider's status (a context-window error is `context_length_exceeded`, so the proxy's overflow
retry and every OpenAI client recognise it); timeouts and connection failures are
`UpstreamError`s like any transport failure.

litellm is imported inside the functions that call it, on the first request routed here: a
deployment without a litellm upstream never imports it (start-up time and memory unchanged).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

from proxy.errors import ErrorCode, ProxyError, error_envelope
from proxy.jsonio import dumps, loads_object
from proxy.settings import UpstreamSettings
from proxy.upstream.base import CallTimer, UpstreamError, UpstreamResponse

log = logging.getLogger("ctxproxy.upstream")
JSON = "application/json"
MESSAGES_WIRE = "anthropic_messages"
_PASSED_BY_US = frozenset({"model", "messages", "stream"})
_CODES = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    404: "model_not_found",
    429: "rate_limit_exceeded",
}


def _litellm() -> Any:
    """litellm, imported on first use; its model map is read from the package (no download)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LitellmUpstream:
    """One configured litellm provider; the route and the provider never come from the client."""

    def __init__(self, settings: UpstreamSettings, session: aiohttp.ClientSession) -> None:
        self.settings = settings
        self.name = settings.name

    async def open(
        self,
        method: str,
        path: str,
        *,
        headers: CIMultiDict[str],
        body: bytes | None,
        query: str = "",
        timer: CallTimer | None = None,
        at_root: bool = False,
    ) -> UpstreamResponse:
        """Only chat completions go through litellm: any other route is a 404 answer."""
        error = error_envelope(
            ErrorCode.not_found, f"Upstream {self.name!r} (litellm) serves chat completions only"
        )
        return BytesResponse(404, dumps(error))

    async def chat_completions(
        self,
        *,
        headers: CIMultiDict[str],
        body: bytes,
        timer: CallTimer | None = None,
        wire: str = "openai_chat",
    ) -> UpstreamResponse:
        """OpenAI clients through `litellm.acompletion`; Anthropic Messages clients
        (`wire == "anthropic_messages"`) through litellm's Messages interface, which answers in
        Anthropic's format (events as they come) whatever the provider."""
        request = loads_object(body)
        stream = request.get("stream") is True
        messages = wire == MESSAGES_WIRE
        sent = timer.upstream_started() if timer is not None else 0.0
        try:
            if messages:
                answer = await _litellm().anthropic.messages.acreate(
                    **self._messages_arguments(request, headers)
                )
            else:
                answer = await _litellm().acompletion(**self._arguments(request, headers))
        except Exception as exc:  # litellm's own exception types: mapped below
            response = self._error(exc, messages)
        else:
            whole = not stream
            response = _whole(answer) if whole else StreamResponse(answer, self.name, raw=messages)
        if timer is not None:
            timer.upstream_answered(self.name, sent)
        return response

    def _messages_arguments(
        self, request: dict[str, Any], headers: CIMultiDict[str]
    ) -> dict[str, Any]:
        arguments = {k: v for k, v in request.items() if k not in ("model", "stream")}
        arguments.update(
            model=f"{self.settings.provider}/{request.get('model')}",
            stream=request.get("stream") is True,
        )
        return self._with_route(arguments, headers)

    def _arguments(self, request: dict[str, Any], headers: CIMultiDict[str]) -> dict[str, Any]:
        arguments = {k: v for k, v in request.items() if k not in _PASSED_BY_US}
        arguments.update(
            model=f"{self.settings.provider}/{request.get('model')}",
            messages=request.get("messages"),
            stream=request.get("stream") is True,
            drop_params=True,
            timeout=self.settings.timeouts.total_s,
            num_retries=0,
        )
        return self._with_route(arguments, headers)

    def _with_route(self, arguments: dict[str, Any], headers: CIMultiDict[str]) -> dict[str, Any]:
        """`api_base` from config, `api_key` from the request (or config)."""
        if self.settings.base_url:
            arguments["api_base"] = self.settings.base_url
        key = _key(headers) or self.settings.api_key
        if key:
            arguments["api_key"] = key
        return arguments

    def _error(self, exc: Exception, messages: bool = False) -> UpstreamResponse:
        """litellm's exception as the error answer the client gets, in its format (OpenAI's, or
        Anthropic's for Messages clients), or an UpstreamError for transport failures."""
        litellm = _litellm()
        if isinstance(exc, litellm.Timeout | TimeoutError):
            raise UpstreamError(
                ErrorCode.upstream_timeout, f"Upstream {self.name!r} did not answer in time"
            ) from exc
        status = getattr(exc, "status_code", None)
        if isinstance(exc, litellm.APIConnectionError) or not isinstance(status, int):
            log.warning("upstream %r (litellm) failed", self.name, exc_info=exc)
            raise UpstreamError(
                ErrorCode.upstream_unavailable,
                f"Upstream {self.name!r} failed: {type(exc).__name__}",
            ) from exc
        code = _CODES.get(status, type(exc).__name__)
        if isinstance(exc, litellm.ContextWindowExceededError):
            status, code = 400, "context_length_exceeded"
        message = str(getattr(exc, "message", "") or exc)
        if messages:
            return BytesResponse(status, dumps(_anthropic_error(status, code, message)))
        error = {"message": message, "type": _error_type(status), "param": None, "code": code}
        return BytesResponse(status, dumps({"error": error}))


def _anthropic_error(status: int, code: str, message: str) -> dict[str, Any]:
    """Anthropic's envelope; a context-window error reads "prompt is too long" (what Claude Code
    and the `anthropic` SDK look for)."""
    if code == "context_length_exceeded" and "prompt is too long" not in message:
        message = f"prompt is too long: {message}"
    kinds = {
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    kind = kinds.get(status, "invalid_request_error" if 400 <= status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _error_type(status: int) -> str:
    return "invalid_request_error" if 400 <= status < 500 else "api_error"


def _key(headers: CIMultiDict[str]) -> str | None:
    value = headers.get("Authorization", "")
    if value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    return headers.get("x-api-key") or headers.get("api-key") or None


def _whole(answer: Any) -> UpstreamResponse:
    if isinstance(answer, dict):  # the Messages interface answers with a plain dict
        return BytesResponse(200, dumps(answer))
    return BytesResponse(200, answer.model_dump_json().encode())


class BytesResponse(UpstreamResponse):
    """A whole answer made here (a completion or an error)."""

    def __init__(self, status: int, body: bytes, content_type: str = JSON) -> None:
        self._status = status
        self._body = body
        self._headers = CIMultiDictProxy(CIMultiDict({"Content-Type": content_type}))
        self._closed = False

    @property
    def status(self) -> int:
        return self._status

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._headers

    async def read(self) -> bytes:
        return self._body

    def chunks(self) -> AsyncIterator[bytes]:
        return _one(self._body)

    def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed


async def _one(body: bytes) -> AsyncIterator[bytes]:
    yield body


class StreamResponse(BytesResponse):
    """litellm's chunk stream as OpenAI SSE: one `data:` event per chunk, then `[DONE]`; with
    `raw`, the Messages interface's stream, whose items are Anthropic events already encoded."""

    def __init__(self, stream: Any, upstream: str, *, raw: bool = False) -> None:
        super().__init__(200, b"", "text/event-stream")
        self._stream = stream
        self._upstream = upstream
        self._raw = raw

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    def chunks(self) -> AsyncIterator[bytes]:
        return self._events()

    async def _events(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                if self.closed:
                    return
                if self._raw:
                    yield chunk if isinstance(chunk, bytes) else str(chunk).encode()
                    continue
                yield b"data: " + chunk.model_dump_json().encode() + b"\n\n"
        except ProxyError:
            raise
        except Exception as exc:  # a provider failing mid-stream: a transport error here
            raise UpstreamError(
                ErrorCode.upstream_unavailable,
                f"Upstream {self._upstream!r} broke the stream: {type(exc).__name__}",
            ) from exc
        if not self._raw:
            yield b"data: [DONE]\n\n"
