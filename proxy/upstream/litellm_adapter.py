"""The `litellm` upstream kind: any provider litellm speaks, behind the OpenAI wire format.

A chat completion (OpenAI JSON, already prepared) is sent with `litellm.acompletion` as
`<provider>/<model>`, to the upstream's `base_url` when it names one, with the credential the
edge decided (the `Authorization` bearer or `x-api-key`). The answer comes back in the OpenAI
wire format: a JSON body, or `text/event-stream` chunks translated one by one (`data: {...}`,
then `data: [DONE]`), so the rest of the proxy cannot tell this upstream from an HTTP one.

Provider errors become OpenAI error answers with the provider's status (a context-window error
keeps its message and gets the code `context_length_exceeded`, so the overflow retry and the
clients recognise it); timeouts and connection failures are `UpstreamError`s like any
transport failure. Anthropic Messages completions (`/messages`: Claude Code on any provider,
e.g. a local vLLM) go through litellm's Messages interface, which answers in Anthropic's format
(whole, or its events as they come), errors in Anthropic's envelope. Other routes (`/models`,
...) and other formats' completions (`/responses`) are not served: a 404 in the OpenAI envelope.

litellm is imported on the first call, in a thread (it takes seconds and ~190 MB): a deployment
that never routes here never imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

from multidict import CIMultiDict, CIMultiDictProxy

from proxy.errors import ErrorCode
from proxy.jsonio import dumps, loads_object
from proxy.settings import UpstreamSettings
from proxy.upstream.base import (
    CHAT_COMPLETIONS_ROUTE,
    MESSAGES_ROUTE,
    CallTimer,
    UpstreamError,
    UpstreamResponse,
)

_log = logging.getLogger("ctxproxy.upstream")

_JSON = "application/json"
_EVENT_STREAM = "text/event-stream"
_STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class LitellmUpstream:
    """Calls litellm's async API for one configured upstream (`upstreams[].provider`)."""

    api_key_header = False
    native_format = "openai_chat"

    def __init__(self, settings: UpstreamSettings, session: object = None) -> None:
        self.settings = settings
        self.name = settings.name
        self._litellm: ModuleType | None = None
        self._importing = asyncio.Lock()

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
        message = f"{method} {path} is not served by the litellm upstream {self.name!r}"
        return BufferedResponse(404, _JSON, _error_body(message, "not_found_error", None))

    async def send(
        self,
        *,
        headers: CIMultiDict[str],
        body: bytes,
        timer: CallTimer | None = None,
        route: str = CHAT_COMPLETIONS_ROUTE,
    ) -> UpstreamResponse:
        if route not in (CHAT_COMPLETIONS_ROUTE, MESSAGES_ROUTE):  # `/responses`: a 404
            return await self.open("POST", route, headers=headers, body=body, timer=timer)
        messages = route == MESSAGES_ROUTE
        litellm = await self._module()
        request = loads_object(body)
        stream = request.get("stream") is True
        sent = timer.upstream_started() if timer is not None else 0.0
        try:
            if messages:  # Anthropic clients: litellm's Messages interface, any provider
                answer = await litellm.anthropic.messages.acreate(
                    **self.messages_arguments(request, headers)
                )
            else:
                answer = await litellm.acompletion(**self.arguments(request, headers))
            # A stream that fails before its first chunk (litellm's MidStreamFallbackError) is
            # a failed call, answered with its status like a whole one, not a 200 and an event.
            events = await _Events.started(answer, self.name, raw=messages) if stream else None
        except Exception as exc:
            return self._failed(litellm, exc, messages)
        finally:
            if timer is not None:
                timer.upstream_answered(self.name, sent)
        if events is not None:
            return StreamResponse(events)
        return BufferedResponse(200, _JSON, dumps(_plain(answer)))

    def messages_arguments(
        self, request: dict[str, Any], headers: CIMultiDict[str]
    ) -> dict[str, Any]:
        """litellm's Messages arguments: the Anthropic body's fields, the provider's model, the
        key and base URL of this upstream (answers come back in Anthropic's format)."""
        arguments = self.arguments(request, headers)
        arguments.pop("drop_params", None)
        arguments["stream"] = request.get("stream") is True
        return arguments

    def arguments(self, request: dict[str, Any], headers: CIMultiDict[str]) -> dict[str, Any]:
        """litellm's arguments for an OpenAI request body: every field passes, the model gets
        the provider's prefix, the key and base URL are this upstream's."""
        arguments = dict(request)
        model = str(arguments.get("model", ""))
        provider = self.settings.provider
        if provider and not model.startswith(f"{provider}/"):
            model = f"{provider}/{model}"
        arguments["model"] = model
        arguments["drop_params"] = True  # what a provider lacks is left out, not an error
        arguments["timeout"] = self.settings.timeouts.total_s
        key = _credential(headers) or self.settings.api_key
        if key:
            arguments["api_key"] = key
        if self.settings.base_url:
            arguments["api_base"] = self.settings.base_url
        return arguments

    async def _module(self) -> ModuleType:
        if self._litellm is None:
            async with self._importing:
                if self._litellm is None:
                    self._litellm = await asyncio.to_thread(import_litellm)
        return self._litellm

    def _failed(
        self, litellm: ModuleType, exc: Exception, messages: bool = False
    ) -> UpstreamResponse:
        code = transport_failure(exc)
        if code is ErrorCode.upstream_timeout:
            raise UpstreamError(code, f"Upstream {self.name!r} did not answer in time") from exc
        if code is not None:
            _log.warning("upstream %r at %s is unreachable: %s: %s", self.name,
                         self.settings.where(), type(exc).__name__, _first_line(exc))  # fmt: skip
            raise UpstreamError(
                code, f"Upstream {self.name!r} is unreachable: {type(exc).__name__}"
            ) from exc
        if messages:
            return anthropic_error_response(litellm, exc)
        return error_response(litellm, exc)


def anthropic_error_response(litellm: ModuleType, exc: Exception) -> UpstreamResponse:
    """A provider's error in Anthropic's envelope, for a Messages client; a context-window error
    reads "prompt is too long" (what Claude Code and the `anthropic` SDK look for)."""
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) and 400 <= status <= 599 else 502
    message = str(getattr(exc, "message", "") or exc)
    if isinstance(exc, litellm.ContextWindowExceededError):
        status = 400
        if "prompt is too long" not in message:
            message = f"prompt is too long: {message}"
    error_type = _STATUS_TYPES.get(status, "api_error")
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return BufferedResponse(status, _JSON, dumps(body))


def transport_failure(exc: BaseException) -> ErrorCode | None:
    """`upstream_timeout` / `upstream_unavailable` when `exc` (or what caused it: litellm wraps
    a refused connection in an InternalServerError) is a transport failure, else None."""
    import openai  # litellm's own dependency, loaded with it

    seen: BaseException | None = exc
    for _ in range(16):  # a cause chain is short; never loop on a cyclic one
        if seen is None:
            return None
        if isinstance(seen, TimeoutError | openai.APITimeoutError):
            return ErrorCode.upstream_timeout
        if isinstance(seen, OSError | openai.APIConnectionError):
            return ErrorCode.upstream_unavailable
        seen = seen.__cause__ or seen.__context__
    return None


_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Proxy", "LiteLLM Router")


def _first_line(exc: BaseException) -> str:
    """The first line of what litellm says of a failure (its messages run over many lines)."""
    return (str(exc).strip().splitlines() or [""])[0][:300]


def import_litellm() -> ModuleType:
    # litellm fetches its model map from the internet at import unless told otherwise; the
    # proxy never reaches out for data of its own (it reads the bundled map).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = importlib.import_module("litellm")
    quiet_litellm(litellm)
    return litellm


def quiet_litellm(litellm: ModuleType) -> None:
    """litellm's logging inside ours: its loggers lose their own stderr handlers (plain and
    ANSI lines between our JSON records) and go through the root handler, warnings and worse
    only; its printed debug banners ("Give Feedback", "LiteLLM.Info") are off."""
    setattr(litellm, "suppress_debug_info", True)  # noqa: B010 (a module typed ModuleType)
    for name in _LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
        logger.setLevel(logging.WARNING)


def error_response(litellm: ModuleType, exc: Exception) -> UpstreamResponse:
    """A provider's error as the OpenAI error answer a client of this upstream would get."""
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) and 400 <= status <= 599 else 502
    message = str(getattr(exc, "message", "") or exc)
    code = None
    if isinstance(exc, litellm.ContextWindowExceededError):
        status, code = 400, "context_length_exceeded"
    error_type = _STATUS_TYPES.get(status, "api_error")
    return BufferedResponse(status, _JSON, _error_body(message, error_type, code))


def _error_body(message: str, error_type: str, code: str | None) -> bytes:
    return dumps({"error": {"message": message, "type": error_type, "param": None, "code": code}})


def _credential(headers: CIMultiDict[str]) -> str | None:
    bearer = headers.get("Authorization", "")
    if bearer.lower().startswith("bearer "):
        return bearer[7:].strip() or None
    return headers.get("x-api-key") or headers.get("api-key") or None


def _plain(answer: Any) -> dict[str, Any]:
    """A litellm response object as plain OpenAI JSON (its private fields left out)."""
    dumped = answer.model_dump() if hasattr(answer, "model_dump") else dict(answer)
    return {k: v for k, v in dumped.items() if not k.startswith("_")}


class _Events:
    """litellm's stream chunks as OpenAI SSE events, then the done marker (an iterator, not a
    generator: a reader that stops early leaves nothing to finalise but litellm's stream)."""

    def __init__(self, chunks: Any, name: str, *, raw: bool = False) -> None:
        self._chunks = chunks.__aiter__()
        self._name = name
        self._done = False
        self._raw = raw
        """litellm's Messages stream: its items are Anthropic events, encoded already."""
        self._first: list[Any] = []
        """The first chunk, read ahead by `started` (empty: none read, or the stream ended)."""

    @classmethod
    async def started(cls, chunks: Any, name: str, *, raw: bool) -> _Events:
        """The events of a stream whose first chunk has come: raises what the provider raised
        before it (the call failed), never an `UpstreamError` of a stream that broke."""
        events = cls(chunks, name, raw=raw)
        with contextlib.suppress(StopAsyncIteration):
            events._first.append(await events._chunks.__anext__())
        return events

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> bytes:
        if self._done:
            raise StopAsyncIteration
        try:
            chunk = self._first.pop() if self._first else await self._chunks.__anext__()
        except StopAsyncIteration:
            self._done = True
            if self._raw:
                raise
            return b"data: [DONE]\n\n"
        except Exception as exc:
            self._done = True
            raise self._error(exc) from exc
        if self._raw:
            return chunk if isinstance(chunk, bytes) else str(chunk).encode()
        return b"data: " + dumps(_plain(chunk)) + b"\n\n"

    def _error(self, exc: Exception) -> UpstreamError:
        if transport_failure(exc) is ErrorCode.upstream_timeout:
            return UpstreamError(
                ErrorCode.upstream_timeout, f"Upstream {self._name!r} stopped sending"
            )
        return UpstreamError(
            ErrorCode.upstream_unavailable,
            f"Upstream {self._name!r} broke the stream: {type(exc).__name__}",
        )


class _Once:
    """One chunk: a whole body read as a stream."""

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body

    def __aiter__(self) -> _Once:
        return self

    async def __anext__(self) -> bytes:
        if self._body is None:
            raise StopAsyncIteration
        body, self._body = self._body, None
        return body


class BufferedResponse(UpstreamResponse):
    """An answer held whole in memory."""

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        self._status = status
        self._headers = CIMultiDictProxy(CIMultiDict({"Content-Type": content_type}))
        self._body = body
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
        return _Once(self._body)

    def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed


class StreamResponse(UpstreamResponse):
    """An event stream produced as the provider's chunks arrive."""

    def __init__(self, events: _Events) -> None:
        self._events = events
        self._headers = CIMultiDictProxy(CIMultiDict({"Content-Type": _EVENT_STREAM}))
        self._closed = False

    @property
    def status(self) -> int:
        return 200

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._headers

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self._events])

    def chunks(self) -> AsyncIterator[bytes]:
        return self._events

    def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed
