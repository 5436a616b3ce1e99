"""The native Anthropic Messages upstream (kind `anthropic`): the HTTP upstream, Anthropic's style.

The same transport as every HTTP kind (`http_upstream`: a completion goes to its format's route,
Messages to `POST {api root}/messages`, Chat Completions to Anthropic's OpenAI-compatible
`/chat/completions`); the API root is the configured `base_url` with `/v1` added when it does not
end with it (`https://api.anthropic.com` and `https://api.anthropic.com/v1` are the same
upstream). The client's `anthropic-version` and `anthropic-beta` headers cross as they came
(`headers.forward_request_headers`); a request without `anthropic-version` gets
`DEFAULT_VERSION`. The operator's key goes as `x-api-key`. Bytes are forwarded unchanged when
preparation changed nothing.
"""

from __future__ import annotations

from proxy.upstream.http_upstream import HttpStyle

DEFAULT_VERSION = "2023-06-01"
VERSION_HEADER = "anthropic-version"


def api_root(base_url: str) -> str:
    """`base_url` ending with `/v1` (added when missing), without a final slash."""
    base = base_url.rstrip("/")
    return base if base.endswith("/v1") else f"{base}/v1"


ANTHROPIC_STYLE = HttpStyle(
    native_format="anthropic_messages",
    api_key_header=True,
    default_headers={VERSION_HEADER: DEFAULT_VERSION},
    api_root=api_root,
)
