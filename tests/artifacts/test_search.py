"""`proxy.artifacts.search`: chunked case-insensitive literal search (the read tool's search)."""

from __future__ import annotations

import re

import pytest

from proxy.artifacts import search
from proxy.artifacts.search import find_all, fold, search_result
from proxy.artifacts.store import Artifact

TEXT = "xAAaaAax\naaa\u0130Ia \u03a3\u03c3\u03c2 aAa" * 5 + "aaaa"
PATTERNS = [
    "aa",
    "aaa",
    "a",
    "x\na",
    "ii",
    "\u03c3\u03c3",
    "\u03c2\u03a3",
    "AAAA",
    "zz",
    TEXT[3:40],
]


@pytest.mark.parametrize("chunk", [7, 8, 9, 16, 1000])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_chunked_search_finds_what_a_regex_finds(
    chunk: int, pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "SEARCH_CHUNK_CHARS", chunk)
    expected = [m.start() for m in re.finditer(re.escape(pattern), TEXT, re.IGNORECASE)]
    assert list(find_all(TEXT, fold(pattern))) == expected
    result = search_result(Artifact("art_x", TEXT, "k", {}, 0.0), pattern, 50)
    assert [m["offset"] for m in result["matches"]] == expected[:50]
    assert result["total_matches"] == len(expected)


def test_fold_keeps_one_character_per_character() -> None:
    text = "\u0130stanbul \u039f\u03a3 \u00df \u212a"
    folded = fold(text)
    assert len(folded) == len(text)
    assert folded == "istanbul \u03bf\u03c3 \u00df k"
