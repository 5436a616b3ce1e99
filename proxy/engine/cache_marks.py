"""Prompt-cache breakpoints on the request that goes upstream (the policy's `cache_marks`).

Only for an upstream that caches at explicit breakpoints (Anthropic's prompt caching: the
completion driver says so, `CallOptions.cache_marks`), and only in the modes that change
requests (`window`, `compact`; `off`, `inspect` and `reject` promise never to). Where the
breakpoints go is the wire format's decision (`WireFormat.cache_marks`); this module applies it
and writes it down in the manifest with what the provider will write to its cache: the prompt
through the last breakpoint (`written_tokens`; `written_tokens_unchanged` for the request as it
came), which a dry run prices at the cache-write price.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proxy.engine.manifest import Manifest
from proxy.engine.policy import Policy
from proxy.engine.wire import CacheMarksMode, WireFormat


def marks_mode(policy: Policy, upstream_caches_at_marks: bool) -> CacheMarksMode | None:
    """The `cache_marks` mode a request is prepared under; None: its breakpoints are left alone
    (the upstream does not cache at them, or the policy's mode never changes a request)."""
    if not upstream_caches_at_marks or not policy.reduces:
        return None
    return policy.cache_marks


def apply_marks(
    wire: WireFormat,
    mode: CacheMarksMode,
    body: dict[str, Any],
    stable_items: int,
    tokens_through: Callable[[int], int],
    manifest: Manifest,
    unchanged_written: int,
) -> dict[str, Any] | None:
    """`body` with its breakpoints as `mode` wants them, or None when it stays as it is;
    `tokens_through(n)`: the prompt's tokens through its first `n` items (tools and system
    included); `unchanged_written`: what the request as it came makes the provider write."""
    marks = wire.cache_marks(body, mode, stable_items)
    if marks is None:
        return None
    written = 0 if marks.through_items is None else tokens_through(marks.through_items)
    manifest.cache_marks = {
        "mode": mode,
        "placed": list(marks.placed),
        "client_marks": marks.client,
        "removed": marks.removed,
        "written_tokens": written,
        "written_tokens_unchanged": unchanged_written,
    }
    return marks.body


def client_written(
    wire: WireFormat, body: dict[str, Any], tokens_through: Callable[[int], int]
) -> int:
    """What the request as it came makes the provider write: its prompt through its own last
    breakpoint (0 without any)."""
    marks = wire.cache_marks(body, "keep", 0)
    through = None if marks is None else marks.through_items
    return 0 if through is None else tokens_through(through)
