"""An in-memory `Upstream` for unit tests (no sockets), in the spirit of httpx's MockTransport.

    upstream = UpstreamDouble(sse_answer([chunk(content="Hi")]), json_answer({"id": "x"}))
    upstream = UpstreamDouble(handler=lambda call: json_answer(call.json()))

Every call is recorded (`calls`), every response handed out is kept (`responses`, to check that
it was closed). An `Answer` is a whole body or a list of chunks (each one transport chunk), and
may end with an `UpstreamError` as a broken connection would; a scripted `UpstreamError` in place
of an answer is raised by the call itself (an unreachable upstream, a first-byte timeout).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from multidict import CIMultiDict, CIMultiDictProxy

from proxy.errors import ErrorCode
from proxy.settings import UpstreamSettings
from proxy.upstream.base import CallTimer, UpstreamError, UpstreamResponse

CHAT_PATH = "/chat/completions"
JSON = {"Content-Type": "application/json"}
EVENT_STREAM = {"Content-Type": "text/event-stream"}


@dataclass(frozen=True)
class Call:
    """One request as the upstream got it."""

    method: str
    path: str
    headers: CIMultiDict[str]
    body: bytes | None
    query: str = ""
    at_root: bool = False
    """The path is relative to the server root, not the API root (`Upstream.open`)."""

    def json(self) -> Any:
        assert self.body is not None
        return json.loads(self.body)


@dataclass(frozen=True)
class Answer:
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=lambda: dict(JSON))
    body: bytes = b""
    chunks: Sequence[bytes] | None = None
    """When set, the body arrives in these chunks (and `body` is ignored)."""
    error: UpstreamError | None = None
    """Raised once the body (or the chunks) so far have been delivered."""


Scripted = Answer | UpstreamError
Handler = Callable[[Call], Scripted]


BROKEN = "Upstream 'fake' broke the connection: ClientPayloadError"


def broken(message: str = BROKEN) -> UpstreamError:
    """What a real upstream raises when its connection breaks."""
    return UpstreamError(ErrorCode.upstream_unavailable, message)


def json_answer(
    payload: Mapping[str, Any] | bytes, status: int = 200, headers: Mapping[str, str] | None = None
) -> Answer:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return Answer(status, {**JSON, **(headers or {})}, body)


def sse_event(payload: Mapping[str, Any] | bytes) -> bytes:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return b"data: " + data + b"\n\n"


def sse_answer(
    events: Iterable[Mapping[str, Any] | bytes],
    *,
    done: bool = True,
    error: UpstreamError | None = None,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """One chunk per event (dicts as `data: <json>`, bytes as raw chunks), then `data: [DONE]`."""
    chunks = [e if isinstance(e, bytes) else sse_event(e) for e in events]
    if done:
        chunks.append(b"data: [DONE]\n\n")
    return Answer(status, {**EVENT_STREAM, **(headers or {})}, chunks=chunks, error=error)


class ResponseDouble(UpstreamResponse):
    def __init__(self, answer: Answer) -> None:
        self._answer = answer
        self._headers = CIMultiDictProxy(CIMultiDict(answer.headers))
        self._closed = False
        self.delivered: list[bytes] = []
        """The chunks read so far."""

    @property
    def status(self) -> int:
        return self._answer.status

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._headers

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    def chunks(self) -> AsyncIterator[bytes]:
        assert not self._closed, "read after close"
        answer = self._answer
        return _Chunks(self, answer.chunks if answer.chunks is not None else [answer.body])

    def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def error(self) -> UpstreamError | None:
        return self._answer.error


class _Chunks:
    def __init__(self, response: ResponseDouble, chunks: Sequence[bytes]) -> None:
        self._response = response
        self._pending = deque(chunks)

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> bytes:
        assert not self._response.closed, "read after close"
        if self._pending:
            chunk = self._pending.popleft()
            self._response.delivered.append(chunk)
            return chunk
        if self._response.error is not None:
            raise self._response.error
        raise StopAsyncIteration


class UpstreamDouble:
    """Answers from `script` in order, or from `handler`; records calls and responses."""

    def __init__(
        self,
        *script: Scripted,
        handler: Handler | None = None,
        name: str = "fake",
        native_format: str = "openai_chat",
    ) -> None:
        self.name = name
        self.native_format = native_format
        self.api_key_header = native_format == "anthropic_messages"
        self.settings = UpstreamSettings(name=name, base_url="http://upstream.invalid/v1")
        self.calls: list[Call] = []
        self.responses: list[ResponseDouble] = []
        self._script = deque(script)
        self._handler = handler

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
        call = Call(method, path, CIMultiDict(headers), body, query, at_root)
        self.calls.append(call)
        sent = timer.upstream_started() if timer is not None else 0.0
        scripted = self._next(call)
        if isinstance(scripted, UpstreamError):
            raise scripted
        if timer is not None:
            timer.upstream_answered(self.name, sent)
        response = ResponseDouble(scripted)
        self.responses.append(response)
        return response

    async def send(
        self,
        *,
        headers: CIMultiDict[str],
        body: bytes,
        timer: CallTimer | None = None,
        route: str = CHAT_PATH,
    ) -> UpstreamResponse:
        return await self.open("POST", route, headers=headers, body=body, timer=timer)

    def _next(self, call: Call) -> Scripted:
        if self._handler is not None:
            return self._handler(call)
        assert self._script, f"no answer scripted for call {len(self.calls)}: {call.path}"
        return self._script.popleft()

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the calls, in order."""
        return [call.json() for call in self.calls]

    @property
    def all_closed(self) -> bool:
        return all(response.closed for response in self.responses)
