"""The native Anthropic Messages upstream: raw aiohttp against a configured base URL.

The same transport as the OpenAI-compatible kind (`openai_http`: a completion goes to its
format's route, Messages to `POST {api root}/messages`, Chat Completions to Anthropic's
OpenAI-compatible `/chat/completions`), with Anthropic's headers; the API root is the configured
`base_url` with `/v1` added when it does not end with it (`https://api.anthropic.com` and
`https://api.anthropic.com/v1` are the same upstream). The client's `anthropic-version` and
`anthropic-beta` headers cross as they came (`headers.forward_request_headers`); a request
without `anthropic-version` gets `DEFAULT_VERSION`. The operator's key goes as `x-api-key`
(decided where the headers are built, `forward_request_headers(..., api_key_header=True)`).
Bytes are forwarded unchanged when preparation changed nothing.
"""

from __future__ import annotations

import aiohttp
from multidict import CIMultiDict

from proxy.settings import UpstreamSettings
from proxy.upstream.base import CallTimer, UpstreamResponse
from proxy.upstream.openai_http import OpenAIHttpUpstream

DEFAULT_VERSION = "2023-06-01"
VERSION_HEADER = "anthropic-version"


def api_root(base_url: str) -> str:
    """`base_url` ending with `/v1` (added when missing), without a final slash."""
    base = base_url.rstrip("/")
    return base if base.endswith("/v1") else f"{base}/v1"


class AnthropicHttpUpstream(OpenAIHttpUpstream):
    """Sends Messages requests to one configured Anthropic-compatible upstream."""

    api_key_header = True
    native_format = "anthropic_messages"

    def __init__(self, settings: UpstreamSettings, session: aiohttp.ClientSession) -> None:
        rooted = settings.model_copy(update={"base_url": api_root(settings.base_url)})
        super().__init__(rooted, session)
        self.settings = settings

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
        if VERSION_HEADER not in headers:
            headers = CIMultiDict(headers)
            headers[VERSION_HEADER] = DEFAULT_VERSION
        return await super().open(
            method, path, headers=headers, body=body, query=query, timer=timer, at_root=at_root
        )
