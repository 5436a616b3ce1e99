"""The upstream seam: what the rest of the proxy knows of a model provider.

An `Upstream` opens requests and answers with an `UpstreamResponse` of our own (status, headers,
the body whole or chunk by chunk); which path, protocol or client library it uses is its own
business. Every transport failure, while opening or while reading the body, is an `UpstreamError`
(a `ProxyError` with code `upstream_timeout` or `upstream_unavailable`), so callers catch one type
and the edge answers it like any other error. No client library type leaves `proxy.upstream`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Protocol

from multidict import CIMultiDict, CIMultiDictProxy

from proxy.errors import ErrorCode, ProxyError
from proxy.settings import UpstreamSettings

CHAT_COMPLETIONS_ROUTE = "/chat/completions"
MESSAGES_ROUTE = "/messages"
"""Anthropic Messages: served by Anthropic, and by vLLM and llama.cpp beside chat completions."""
"""The endpoint of OpenAI chat completions, relative to the API root."""


class UpstreamError(ProxyError):
    """A transport failure talking to an upstream (not an error answer: those are responses)."""


def upstream_read_error(exc: BaseException, name: str) -> UpstreamError:
    """The error for a body that stopped arriving (`exc` is the transport's own exception).

    Only the exception's type is named: its text may quote the body (and credentials in it).
    """
    if isinstance(exc, TimeoutError):
        return UpstreamError(ErrorCode.upstream_timeout, f"Upstream {name!r} stopped sending")
    return UpstreamError(
        ErrorCode.upstream_unavailable,
        f"Upstream {name!r} broke the connection: {type(exc).__name__}",
    )


async def read_at_most(answer: UpstreamResponse, limit: int) -> bytes:
    """The decoded body, or only its first bytes, a little over `limit` of them, when it is
    longer (reading stops there: the caller sees `len() > limit`)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in answer.chunks():
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return b"".join(parts)


class CallTimer(Protocol):
    """Told when a request is sent and when its response headers arrived (`RequestStats`)."""

    def upstream_started(self) -> float: ...

    def upstream_answered(self, upstream: str, sent: float) -> None: ...


class UpstreamResponse(ABC):
    """An upstream's answer whose headers have arrived; the body is read once, whole or chunked.

    The holder closes it when done (closing twice is harmless); reading it after `close()` is an
    error of the caller.
    """

    @property
    @abstractmethod
    def status(self) -> int: ...

    @property
    @abstractmethod
    def headers(self) -> CIMultiDictProxy[str]:
        """As received: case-insensitive, repeated names kept (`relay_response_headers` filters)."""

    @property
    def is_event_stream(self) -> bool:
        return self.headers.get("Content-Type", "").startswith("text/event-stream")

    @abstractmethod
    async def read(self) -> bytes:
        """The whole body, decoded; raises `UpstreamError` when it stops arriving. Unbounded:
        where the upstream decides the size, read with `read_at_most`."""

    @abstractmethod
    def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives, its content coding undone in bounded pieces (`codings`);
        raises `UpstreamError` (`upstream_invalid_response` for a body that does not decode)."""

    @property
    def content_encoding(self) -> str:
        """The `Content-Encoding` of `encoded_chunks()` ("" when it has none)."""
        return ""

    def encoded_chunks(self) -> AsyncIterator[bytes]:
        """The body as it came, still in its `content_encoding`: for a relay the proxy does not
        read, which passes it on compressed instead of inflating it."""
        return self.chunks()

    @abstractmethod
    def close(self) -> None:
        """Release the connection; a body not read to its end is abandoned."""

    @property
    @abstractmethod
    def closed(self) -> bool: ...


class Upstream(Protocol):
    """One configured upstream; the URL and the route of a call are never the client's choice."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> UpstreamSettings: ...

    @property
    def api_key_header(self) -> bool:
        """Whether the key the proxy sends goes as `x-api-key` (Anthropic's style) rather than
        as `Authorization: Bearer` (`headers.forward_request_headers`)."""
        ...

    @property
    def native_format(self) -> str:
        """The client format this upstream speaks natively (a `proxy.formats.FORMATS` name):
        the form of the proxy's own calls to it, such as a summarizer's."""
        ...

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
        """Send a request to `path` (relative to the API root) and wait for the response headers.

        Used for the routes the proxy does not interpret (`/v1/models`, ...); `query` is the raw
        (encoded) query string. `at_root`: `path` is relative to the server's root instead (the
        API root without its `/v1`: llama.cpp's `/props`). Raises `UpstreamError`.
        """
        ...

    async def send(
        self,
        *,
        headers: CIMultiDict[str],
        body: bytes,
        timer: CallTimer | None = None,
        route: str = CHAT_COMPLETIONS_ROUTE,
    ) -> UpstreamResponse:
        """Send one prepared completion (JSON `body`) wherever this upstream serves them.
        `route`: the client format's endpoint, relative to the API root (`/chat/completions`,
        `/responses`: `ClientFormat.upstream_route`); an upstream maps it to its own path."""
        ...


def caches_at_marks(upstream: Upstream) -> bool:
    """Whether the upstream caches a Messages prompt only at its `cache_control` breakpoints
    (Anthropic's prompt caching): the `anthropic` kind, and `litellm` to the provider
    `anthropic` (whose Messages interface passes the breakpoints on as they are)."""
    settings = upstream.settings
    litellm_anthropic = settings.kind == "litellm" and settings.provider == "anthropic"
    return upstream.native_format == "anthropic_messages" or litellm_anthropic
