"""Upstream kinds: one module each, registered here by the name `upstreams[].kind` uses."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import aiohttp

from proxy.settings import UpstreamSettings
from proxy.upstream.anthropic_http import AnthropicHttpUpstream
from proxy.upstream.base import Upstream
from proxy.upstream.litellm_adapter import LitellmUpstream
from proxy.upstream.openai_http import OpenAIHttpUpstream

UpstreamFactory = Callable[[UpstreamSettings, aiohttp.ClientSession], Upstream]

UPSTREAM_KINDS: Mapping[str, UpstreamFactory] = MappingProxyType(
    {
        "openai": OpenAIHttpUpstream,
        "anthropic": AnthropicHttpUpstream,
        "litellm": LitellmUpstream,
    }
)


def unknown_upstream_kinds(upstreams: list[UpstreamSettings]) -> list[str]:
    """`upstreams.<i>.kind: ...` problems, one per upstream whose kind is not registered."""
    known = ", ".join(sorted(UPSTREAM_KINDS))
    return [
        f"upstreams.{i}.kind: unknown upstream kind {u.kind!r} (known: {known})"
        for i, u in enumerate(upstreams)
        if u.kind not in UPSTREAM_KINDS
    ]
