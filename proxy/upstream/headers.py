"""Which headers cross the proxy: the client's towards the upstream, the upstream's back.

Hop-by-hop headers never cross (RFC 9110 7.6.1), nor those the proxy sets itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from multidict import CIMultiDict

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
# upstream answers in a coding the proxy decodes (`codings.ACCEPT_ENCODING`, set by the upstream
# client; a relay the proxy does not read passes the client's own); Content-Encoding because the
# proxy sends the body it decoded (`http.body`); Expect because the proxy has the whole body
# already (with `100-continue` the client session would wait for the upstream's interim answer
# before sending it, and hang on upstreams that never send one).
_REQUEST_DROP = HOP_BY_HOP | {
    "host",
    "content-length",
    "accept-encoding",
    "content-encoding",
    "expect",
}
FORWARDING_HEADERS = frozenset({"forwarded", "via", "x-real-ip"})
"""What a client may claim about the proxies before this one (with every `x-forwarded-*`):
an upstream that trusts them would take a client's word for its address or scheme, so they cross
only where the upstream's `forwarded_headers` is `pass` (behind a proxy of the operator's)."""
_FORWARDING_PREFIX = "x-forwarded-"
_RESPONSE_DROP = HOP_BY_HOP | {"content-length", "content-encoding", "server", "date"}
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key")
"""Headers a client authenticates with upstream (OpenAI/Bearer, Anthropic, Azure): all of them go
when the proxy sends a key of its own, so the client's never travels next to the operator's."""


def forward_request_headers(
    incoming: Mapping[str, str],
    authorization: str | None,
    *,
    api_key_header: bool = False,
    pass_forwarding: bool = False,
) -> CIMultiDict[str]:
    """Client headers minus hop-by-hop ones (fixed, and those the client's `Connection` names).

    `authorization`: None keeps the client's credentials, "" removes them (every header of
    `CREDENTIAL_HEADERS`), anything else replaces them. `api_key_header`: a replacing `Bearer`
    key goes as `x-api-key` instead (Anthropic's own header). `pass_forwarding`: the client's
    `FORWARDING_HEADERS` and `X-Forwarded-*` cross (dropped otherwise)."""
    named = {part.strip().lower() for part in incoming.get("Connection", "").split(",")}
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in incoming.items():
        lower = name.lower()
        if lower in _REQUEST_DROP or lower in named or lower.startswith("x-ctxproxy-"):
            continue
        if authorization is not None and lower in CREDENTIAL_HEADERS:
            continue
        if not pass_forwarding and is_forwarding_header(lower):
            continue
        out.add(name, value)
    if authorization and api_key_header and authorization[:7].lower() == "bearer ":
        out["x-api-key"] = authorization[7:]
    elif authorization:
        out["Authorization"] = authorization
    return out


def is_forwarding_header(lower_name: str) -> bool:
    return lower_name in FORWARDING_HEADERS or lower_name.startswith(_FORWARDING_PREFIX)


def relay_response_headers(upstream: Mapping[str, str]) -> CIMultiDict[str]:
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in upstream.items():
        if name.lower() not in _RESPONSE_DROP:
            out.add(name, value)
    return out
