"""Upstream kinds, registered by the name `upstreams[].kind` uses. The HTTP kinds are one class told
apart by data (`http_upstream.HttpStyle`): a new one is a style and a line here; another transport
(litellm) is a module of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType

import aiohttp

from proxy.settings import UpstreamSettings
from proxy.upstream.anthropic_http import ANTHROPIC_STYLE
from proxy.upstream.base import Upstream
from proxy.upstream.http_upstream import HttpUpstream
from proxy.upstream.litellm_adapter import LitellmUpstream

UpstreamFactory = Callable[[UpstreamSettings, aiohttp.ClientSession], Upstream]

UPSTREAM_KINDS: Mapping[str, UpstreamFactory] = MappingProxyType(
    {
        "openai": HttpUpstream,
        "anthropic": partial(HttpUpstream, style=ANTHROPIC_STYLE),
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
