"""How long the request's own `cache_control` marks ask Anthropic to keep the prompt cached.

A mark is `{"type": "ephemeral"}` (5 minutes from its last use) or `{"type": "ephemeral", "ttl":
"1h"}` (an hour). Only the marks in `messages` count: a cut changes the messages, never the tools
or the system prompt, so a one-hour mark there keeps nothing a cut could break.
"""

from __future__ import annotations

from typing import Any

TTL_SECONDS = {"5m": 300, "1h": 3600}
DEFAULT_MARK_SECONDS = 300


def _mark_ttls(blocks: Any) -> list[int]:
    out: list[int] = []
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        mark = block.get("cache_control")
        if isinstance(mark, dict):
            ttl = mark.get("ttl")
            out.append(TTL_SECONDS.get(ttl, DEFAULT_MARK_SECONDS) if isinstance(ttl, str) else
                       DEFAULT_MARK_SECONDS)  # fmt: skip
        out.extend(_mark_ttls(block.get("content")))
    return out


def marked_cache_ttl(body: dict[str, Any]) -> int | None:
    """The longest lifetime a message mark asks for, in seconds; None without message marks."""
    ttls = [
        ttl
        for message in body.get("messages") or []
        if isinstance(message, dict)
        for ttl in _mark_ttls(message.get("content"))
    ]
    return max(ttls, default=None)
