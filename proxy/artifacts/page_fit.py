"""Shortening a synthetic call's result so that the next upstream call still fits its window.

A page keeps its first characters and says where to read on (`next_offset`); a search keeps its
first matches. Either way the result says it was shortened and why, so the model can ask for the
rest in a later round or a smaller piece. Error results are short already and stay as they are.
"""

from __future__ import annotations

from typing import Any

from proxy.artifacts.read_tool import ReadResult, encode_result

SHORTENED_NOTE = (
    "shortened by the proxy to fit the context window; ask for less (a smaller max_chars or "
    "max_results) or read on from next_offset"
)


def result_chars(result: ReadResult) -> int:
    """The characters of artifact text the result carries (what shortening can take away)."""
    payload = result.payload
    if payload is None:
        return 0
    if isinstance(payload.get("content"), str):
        return len(payload["content"])
    return sum(len(m.get("context", "")) for m in _matches(payload))


def shortened(result: ReadResult, max_chars: int) -> ReadResult:
    """`result` carrying at most `max_chars` characters of artifact text (itself if it does)."""
    payload = result.payload
    if payload is None or result_chars(result) <= max_chars:
        return result
    if isinstance(payload.get("content"), str):
        value = _shorter_page(payload, max(max_chars, 0))
    else:
        value = _fewer_matches(payload, max(max_chars, 0))
    value["shortened"] = SHORTENED_NOTE
    return ReadResult(result.status, encode_result(value), value)


def _shorter_page(page: dict[str, Any], max_chars: int) -> dict[str, Any]:
    content = page["content"][:max_chars]
    offset = page.get("offset")
    start = offset if isinstance(offset, int) else 0
    return {**page, "content": content, "next_offset": start + len(content), "truncated": True}


def _fewer_matches(found: dict[str, Any], max_chars: int) -> dict[str, Any]:
    kept: list[Any] = []
    used = 0
    for match in _matches(found):
        used += len(match.get("context", ""))
        if used > max_chars:
            break
        kept.append(match)
    return {**found, "matches": kept, "truncated": True}


def _matches(payload: dict[str, Any]) -> list[dict[str, Any]]:
    matches = payload.get("matches")
    if not isinstance(matches, list):
        return []
    return [m for m in matches if isinstance(m, dict)]
