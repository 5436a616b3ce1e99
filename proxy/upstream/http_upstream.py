"""The HTTP upstream kinds: raw aiohttp against a configured base URL, one class for every kind,
the kinds told apart by data (`HttpStyle`: where the API root is, which headers a request gets by
default, how the proxy's key goes, the format the upstream speaks natively).

One pooled `ClientSession` per app (owned by app.py); this module only opens requests on it and
turns every transport failure into an `UpstreamError`. Relaying the answer is the caller's job,
chunk by chunk, through the `UpstreamResponse` it gets back.

aiohttp's own decompression is off: it inflates a body whole on the event loop (2 MB of gzip
inflating to 2 GB held the loop for seconds). A request says `Accept-Encoding:
codings.ACCEPT_ENCODING` unless its headers name one (a relay passes the client's); the answer's
`chunks()` are decoded in bounded steps (`proxy.codings`), its `encoded_chunks()` are the bytes
as they came.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from proxy.codings import ACCEPT_ENCODING, CodingError, decoded, parse_content_encoding
from proxy.errors import ErrorCode
from proxy.settings import UpstreamSettings
from proxy.upstream.base import (
    CHAT_COMPLETIONS_ROUTE,
    CallTimer,
    UpstreamError,
    UpstreamResponse,
    upstream_read_error,
)

_log = logging.getLogger("ctxproxy.upstream")

# RFC 3986 pchar minus "%": a decoded path segment is sent literally (its "%", "?", "#" escaped).
_SEGMENT_SAFE = "!$&'()*+,;=:@~"
# An already-encoded query keeps its escapes; only characters never valid in a query are escaped.
_QUERY_SAFE = "/?:@!$&'()*+,;=%~"
_URL_MEMO_ENTRIES = 256
# What aiohttp raises when a body stops arriving (a cut connection, a read timeout, a short body).
_READ_ERRORS = (aiohttp.ClientError, TimeoutError, asyncio.IncompleteReadError)


@dataclass(frozen=True)
class HttpStyle:
    """What one HTTP upstream kind is, as data."""

    native_format: str
    """The client format it speaks natively (`Upstream.native_format`)."""
    api_key_header: bool = False
    """The proxy's key goes as `x-api-key` (`Upstream.api_key_header`)."""
    default_headers: Mapping[str, str] = field(default_factory=dict)
    """Headers a request gets when it has none of that name."""
    api_root: Callable[[str], str] = str
    """The API root of a configured `base_url`."""


OPENAI_STYLE = HttpStyle(native_format="openai_chat")
"""OpenAI-compatible HTTP (kind `openai`): `base_url` is the API root, a Bearer key."""


class HttpUpstream:
    """Sends requests to one configured upstream; the URL never comes from the request."""

    def __init__(
        self,
        settings: UpstreamSettings,
        session: aiohttp.ClientSession,
        style: HttpStyle = OPENAI_STYLE,
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self.native_format = style.native_format
        self.api_key_header = style.api_key_header
        self._defaults = (*style.default_headers.items(), ("Accept-Encoding", ACCEPT_ENCODING))
        self._session = session
        self._base = str(URL(style.api_root(settings.base_url))).rstrip("/")
        self._root = self._base.removesuffix("/v1")
        self._urls: dict[str, str] = {}
        self._parsed: dict[str, URL] = {}
        """`URL` objects of the memoised `url`s (building one parses it: every request)."""
        t = settings.timeouts
        self._timeout = aiohttp.ClientTimeout(
            total=t.total_s, sock_connect=t.connect_s, sock_read=t.idle_read_s
        )

    def url(self, path: str, *, at_root: bool = False) -> str:
        """The encoded URL of `path` (decoded, relative to the API root: `/chat/completions`;
        with `at_root`, to the server root: the API root without a final `/v1`).

        `..` never escapes the root: dot segments are dropped and every segment is
        percent-encoded, so an encoded dot (`%2e`) or `%2f` in a segment stays literal.
        """
        if at_root:  # only the proxy's own fixed paths (`/props`): not memoised
            return f"{self._root}/{_clean(path)}"
        url = self._urls.get(path)
        if url is None:
            url = f"{self._base}/{_clean(path)}"
            if len(self._urls) >= _URL_MEMO_ENTRIES:  # paths come from clients: stay bounded
                self._urls.clear()
            self._urls[path] = url
        return url

    async def send(
        self,
        *,
        headers: CIMultiDict[str],
        body: bytes,
        timer: CallTimer | None = None,
        route: str = CHAT_COMPLETIONS_ROUTE,
    ) -> UpstreamResponse:
        return await self.open("POST", route, headers=headers, body=body, timer=timer)

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
        """Open a request and wait for the response headers (the first-byte timeout).

        `query` is the raw (encoded) query string; `timer` records when the request was sent and
        how long its response headers took; `at_root`: see `url`.
        """
        url = self._parsed_url(path, query, at_root)
        missing = [(k, v) for k, v in self._defaults if k not in headers]
        if missing:  # one copy: the caller's headers are never changed
            headers = CIMultiDict(headers)
            headers.extend(missing)
        sent = timer.upstream_started() if timer is not None else 0.0
        try:
            async with asyncio.timeout(self.settings.timeouts.first_byte_s):
                response = await self._session.request(
                    method,
                    url,
                    data=body,
                    headers=headers,
                    timeout=self._timeout,
                    allow_redirects=False,
                    auto_decompress=False,
                )
        except TimeoutError as exc:
            raise UpstreamError(
                ErrorCode.upstream_timeout,
                f"Upstream {self.name!r} did not answer within "
                f"{self.settings.timeouts.first_byte_s:g}s",
            ) from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as exc:
            _log.warning("upstream %r at %s is unreachable: %s", self.name,
                         self.settings.where(), type(exc).__name__)  # fmt: skip
            raise UpstreamError(
                ErrorCode.upstream_unavailable,
                f"Upstream {self.name!r} is unreachable: {type(exc).__name__}",
            ) from exc
        if timer is not None:
            timer.upstream_answered(self.name, sent)
        return _AiohttpResponse(response, self.name)

    def _parsed_url(self, path: str, query: str, at_root: bool) -> URL:
        """`url(path)` with `query`, as a `URL`; remembered when there is no query."""
        memo = not query and not at_root
        parsed = self._parsed.get(path) if memo else None
        if parsed is None:
            target = self.url(path, at_root=at_root)
            if query:
                target += f"?{quote(query, safe=_QUERY_SAFE)}"
            parsed = URL(target, encoded=True)  # no re-quoting, no dot-segment normalisation
            if memo:
                if len(self._parsed) >= _URL_MEMO_ENTRIES:
                    self._parsed.clear()
                self._parsed[path] = parsed
        return parsed


def _clean(path: str) -> str:
    return "/".join(
        quote(p, safe=_SEGMENT_SAFE) for p in path.split("/") if p not in ("", ".", "..")
    )


class _AiohttpResponse(UpstreamResponse):
    def __init__(self, response: aiohttp.ClientResponse, upstream: str) -> None:
        self._response = response
        self._upstream = upstream

    @property
    def status(self) -> int:
        return self._response.status

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._response.headers

    @property
    def content_encoding(self) -> str:
        return ", ".join(self._response.headers.getall("Content-Encoding", ())).strip()

    async def read(self) -> bytes:
        if self.content_encoding:
            return b"".join([chunk async for chunk in self.chunks()])
        try:
            return await self._response.read()
        except _READ_ERRORS as exc:
            raise upstream_read_error(exc, self._upstream) from exc

    def chunks(self) -> AsyncIterator[bytes]:
        encoded = self.encoded_chunks()
        if not self.content_encoding:
            return encoded
        return _DecodedChunks(encoded, self.content_encoding, self._upstream)

    def encoded_chunks(self) -> AsyncIterator[bytes]:
        return _Chunks(self._response.content.iter_any(), self._upstream)

    def close(self) -> None:
        self._response.close()

    @property
    def closed(self) -> bool:
        return self._response.closed


class _Chunks:
    """aiohttp's chunk iterator with its errors typed (an iterator, not a generator: nothing is
    left to finalise when its reader stops early)."""

    def __init__(self, chunks: AsyncIterator[bytes], upstream: str) -> None:
        self._chunks = chunks
        self._upstream = upstream

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._chunks.__anext__()
        except _READ_ERRORS as exc:
            raise upstream_read_error(exc, self._upstream) from exc


class _DecodedChunks:
    """An answer's chunks with its `Content-Encoding` undone (`codings.decoded`); a coding the
    proxy does not know, or bytes that do not decode, are `upstream_invalid_response`."""

    def __init__(self, encoded: AsyncIterator[bytes], encoding: str, upstream: str) -> None:
        self._encoded = encoded
        self._encoding = encoding
        self._upstream = upstream
        self._chunks: AsyncIterator[bytes] | None = None

    def __aiter__(self) -> _DecodedChunks:
        return self

    async def __anext__(self) -> bytes:
        try:
            if self._chunks is None:
                self._chunks = decoded(self._encoded, parse_content_encoding(self._encoding))
            return await self._chunks.__anext__()
        except CodingError as exc:
            raise UpstreamError(
                ErrorCode.upstream_invalid_response,
                f"Upstream {self._upstream!r} sent a body the proxy cannot decode: {exc}",
            ) from None
