"""Case-insensitive literal search in an artifact, linear in its size whatever the pattern.

The text is lowercased one chunk at a time and searched with `str.find` (no regular expressions,
so nothing can backtrack, and CPython's `find` stays linear for long needles); each C call covers
one chunk, so a worker thread running a search lets the event loop run between chunks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from proxy.artifacts.store import Artifact

SEARCH_CONTEXT_CHARS = 120
MAX_COUNTED_MATCHES = 10_000  # total_matches stops counting here (then it is a lower bound)
SEARCH_CHUNK_CHARS = 1 << 20  # one str.find call scans at most this much (~1 ms)


def search_result(artifact: Artifact, pattern: str, max_results: int) -> dict[str, Any]:
    """Case-insensitive literal matches with their offsets, 1-based lines and ±120 chars
    (matches do not overlap, as with `re.finditer`)."""
    text = artifact.content
    matches: list[dict[str, Any]] = []
    total = 0
    line, line_pos = 1, 0
    for start in find_all(text, fold(pattern)):
        total += 1
        if len(matches) < max_results:
            end = start + len(pattern)
            line += text.count("\n", line_pos, start)
            line_pos = start
            matches.append(
                {
                    "offset": start,
                    "line": line,
                    "context": text[
                        max(0, start - SEARCH_CONTEXT_CHARS) : end + SEARCH_CONTEXT_CHARS
                    ],
                }
            )
        if total >= MAX_COUNTED_MATCHES:
            break
    result: dict[str, Any] = {
        "artifact_id": artifact.id,
        "pattern": pattern,
        "matches": matches,
        "total_matches": total,
        "truncated": total > len(matches),
        "untrusted_content": True,
    }
    if total >= MAX_COUNTED_MATCHES:
        result["total_matches_is_lower_bound"] = True
    return result


def fold(text: str) -> str:
    """Lowercase with exactly one character per character, so offsets into it are offsets into
    `text`: U+0130 (the only character whose lowercase is two) becomes "i", the way `re`'s
    IGNORECASE compares it, and final sigma U+03C2 becomes U+03C3 (they match there too)."""
    return text.replace("\u0130", "i").lower().replace("\u03c2", "\u03c3")


def find_all(text: str, folded: str) -> Iterator[int]:
    """Offsets of the non-overlapping occurrences of `folded` (already folded) in `text`."""
    width = len(folded)
    resume = 0  # the next match may start here (no overlap with the previous one)
    for chunk_start in range(0, len(text), SEARCH_CHUNK_CHARS):
        chunk_end = chunk_start + SEARCH_CHUNK_CHARS
        # The chunk plus width - 1 characters: a match starting in the chunk lies inside it.
        window = fold(text[chunk_start : chunk_end + width - 1])
        position = window.find(folded, max(0, resume - chunk_start))
        while position != -1 and chunk_start + position < chunk_end:
            yield chunk_start + position
            resume = chunk_start + position + width
            position = window.find(folded, position + width)
