"""The upstream client: raw aiohttp against an OpenAI-compatible base URL.

One pooled `ClientSession` per app (owned by app.py); this module only opens requests on it and
turns transport failures into typed errors. Relaying the answer is the caller's job, chunk by chunk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol
from urllib.parse import quote

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from proxy.errors import ErrorCode, ProxyError
from proxy.settings import UpstreamSettings


class CallTimer(Protocol):
    """Told when a request is sent and when its response headers arrived (`RequestStats`)."""

    def upstream_started(self) -> float: ...

    def upstream_answered(self, upstream: str, sent: float) -> None: ...

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Never copied from the client: set by aiohttp or by us. Accept-Encoding is dropped so the
# upstream answers uncompressed and the proxy can read what it relays; Expect is dropped because
# the proxy has the whole body already (with `100-continue` the client session would wait for the
# upstream's interim answer before sending it, and hang on upstreams that never send one).
_REQUEST_DROP = HOP_BY_HOP | {"host", "content-length", "accept-encoding", "expect"}
_RESPONSE_DROP = HOP_BY_HOP | {"content-length", "content-encoding", "server", "date"}
# RFC 3986 pchar minus "%": a decoded path segment is sent literally (its "%", "?", "#" escaped).
_SEGMENT_SAFE = "!$&'()*+,;=:@~"
# An already-encoded query keeps its escapes; only characters never valid in a query are escaped.
_QUERY_SAFE = "/?:@!$&'()*+,;=%~"
_URL_MEMO_ENTRIES = 256


def forward_request_headers(
    incoming: Mapping[str, str], authorization: str | None
) -> CIMultiDict[str]:
    """Client headers minus hop-by-hop ones (fixed, and those the client's `Connection` names).

    `authorization`: None keeps the client's credentials, "" removes them, anything else
    replaces them."""
    named = {part.strip().lower() for part in incoming.get("Connection", "").split(",")}
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in incoming.items():
        lower = name.lower()
        if lower in _REQUEST_DROP or lower in named or lower.startswith("x-ctxproxy-"):
            continue
        if authorization is not None and lower in ("authorization", "api-key"):
            continue
        out.add(name, value)
    if authorization:
        out["Authorization"] = authorization
    return out


def relay_response_headers(upstream: Mapping[str, str]) -> CIMultiDict[str]:
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in upstream.items():
        if name.lower() not in _RESPONSE_DROP:
            out.add(name, value)
    return out


class OpenAIHttpUpstream:
    """Sends requests to one configured upstream; the URL never comes from the request."""

    def __init__(self, settings: UpstreamSettings, session: aiohttp.ClientSession) -> None:
        self.settings = settings
        self.name = settings.name
        self._session = session
        self._base = str(URL(settings.base_url)).rstrip("/")
        self._urls: dict[str, str] = {}
        t = settings.timeouts
        self._timeout = aiohttp.ClientTimeout(
            total=t.total_s, sock_connect=t.connect_s, sock_read=t.idle_read_s
        )

    def url(self, path: str) -> str:
        """The encoded URL of `path` (decoded, relative to the API root: `/chat/completions`).

        `..` never escapes the root: dot segments are dropped and every segment is
        percent-encoded, so an encoded dot (`%2e`) or `%2f` in a segment stays literal.
        """
        url = self._urls.get(path)
        if url is None:
            clean = "/".join(
                quote(p, safe=_SEGMENT_SAFE) for p in path.split("/") if p not in ("", ".", "..")
            )
            url = f"{self._base}/{clean}"
            if len(self._urls) >= _URL_MEMO_ENTRIES:  # paths come from clients: stay bounded
                self._urls.clear()
            self._urls[path] = url
        return url

    async def open(
        self,
        method: str,
        path: str,
        *,
        headers: CIMultiDict[str],
        body: bytes | None,
        query: str = "",
        stats: CallTimer | None = None,
    ) -> aiohttp.ClientResponse:
        """Open a request and wait for the response headers (the first-byte timeout).

        `query` is the raw (encoded) query string; `stats` records when the request was sent and
        how long its response headers took.
        """
        target = self.url(path) + (f"?{quote(query, safe=_QUERY_SAFE)}" if query else "")
        url = URL(target, encoded=True)  # no re-quoting, no dot-segment normalisation
        sent = stats.upstream_started() if stats is not None else 0.0
        try:
            async with asyncio.timeout(self.settings.timeouts.first_byte_s):
                response = await self._session.request(
                    method,
                    url,
                    data=body,
                    headers=headers,
                    timeout=self._timeout,
                    allow_redirects=False,
                    auto_decompress=True,
                )
        except TimeoutError as exc:
            raise ProxyError(
                ErrorCode.upstream_timeout,
                f"Upstream {self.name!r} did not answer within "
                f"{self.settings.timeouts.first_byte_s:g}s",
            ) from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as exc:
            raise ProxyError(
                ErrorCode.upstream_unavailable,
                f"Upstream {self.name!r} is unreachable: {type(exc).__name__}",
            ) from exc
        if stats is not None:
            stats.upstream_answered(self.name, sent)
        return response


def upstream_read_error(exc: BaseException, name: str) -> ProxyError:
    if isinstance(exc, TimeoutError):
        return ProxyError(ErrorCode.upstream_timeout, f"Upstream {name!r} stopped sending")
    return ProxyError(
        ErrorCode.upstream_unavailable,
        f"Upstream {name!r} broke the connection: {type(exc).__name__}",
    )
