"""Shortening a synthetic result: a page keeps its head and says where to read on; a search keeps
its first matches; errors stay as they are."""

from __future__ import annotations

import json

from proxy.artifacts.search import search_result
from proxy.artifacts.store import Artifact
from proxy.synthetic.base import CallStatus, ToolResult
from proxy.synthetic.fit import SHORTENED_NOTE, result_chars, shortened
from proxy.synthetic.read import READ_TOOL, read_result
from proxy.synthetic.search import SEARCH_TOOL

TEXT = "".join(f"line {i}\n" for i in range(1000))
ARTIFACT = Artifact("art_1", TEXT, "tool_result", {}, 0.0)


def found(value: dict[str, object], tool: str = READ_TOOL) -> ToolResult:
    return ToolResult(tool, CallStatus.found, json.dumps(value), value)


def test_a_shortened_page_keeps_its_head_and_says_where_to_read_on() -> None:
    page = found(read_result(ARTIFACT, 100, 2000))
    assert result_chars(page) == 2000
    short = shortened(page, 300)
    data = json.loads(short.text)
    assert data == short.payload
    assert data["content"] == TEXT[100:400]
    assert (data["offset"], data["next_offset"], data["truncated"]) == (100, 400, True)
    assert data["total_chars"] == len(TEXT) and data["shortened"] == SHORTENED_NOTE
    assert short.status == CallStatus.found and result_chars(short) == 300


def test_a_result_within_the_limit_is_itself() -> None:
    page = found(read_result(ARTIFACT, 0, 50))
    assert shortened(page, 50) is page
    assert shortened(page, 10_000) is page


def test_a_page_shortened_to_nothing_reads_on_from_its_own_offset() -> None:
    data = json.loads(shortened(found(read_result(ARTIFACT, 700, 500)), 0).text)
    assert (data["content"], data["next_offset"], data["truncated"]) == ("", 700, True)


def test_a_shortened_search_keeps_its_first_matches() -> None:
    search = found(search_result(ARTIFACT, "line 1", 20), SEARCH_TOOL)
    contexts = [len(m["context"]) for m in search.payload["matches"]]  # type: ignore[index]
    assert len(contexts) == 20 and result_chars(search) == sum(contexts)
    limit = contexts[0] + contexts[1] + contexts[2] // 2
    data = json.loads(shortened(search, limit).text)
    assert data["matches"] == search.payload["matches"][:2]  # type: ignore[index]
    assert data["truncated"] is True and data["shortened"] == SHORTENED_NOTE
    assert data["total_matches"] == search.payload["total_matches"]  # type: ignore[index]


def test_a_result_is_shortened_by_its_own_tools_rule() -> None:
    """A page's rule keeps characters of its content; a search's keeps whole matches."""
    search = found(search_result(ARTIFACT, "line 1", 20), SEARCH_TOOL)
    as_page = found(dict(search.payload or {}), READ_TOOL)  # no content: nothing a page can cut
    assert result_chars(as_page) == 0 and shortened(as_page, 0) is as_page
    assert result_chars(search) > 0 and shortened(search, 0).payload["matches"] == []  # type: ignore[index]


def test_errors_are_never_shortened() -> None:
    error = ToolResult(READ_TOOL, CallStatus.artifact_not_found, '{"error": {"code": "x"}}')
    assert result_chars(error) == 0
    assert shortened(error, 0) is error


def test_the_last_page_shortened_says_it_is_truncated_now() -> None:
    last = found(read_result(ARTIFACT, len(TEXT) - 500, 500))
    assert last.payload is not None and last.payload["truncated"] is False
    data = json.loads(shortened(last, 200).text)
    assert (data["next_offset"], data["truncated"]) == (len(TEXT) - 300, True)


def test_a_page_without_an_offset_reads_on_from_its_start() -> None:
    for offset in ({}, {"offset": None}):
        page = found({"content": "abcdefghij", **offset})
        data = json.loads(shortened(page, 4).text)
        assert (data["content"], data["next_offset"], data["truncated"]) == ("abcd", 4, True)


def test_a_search_of_all_matches_shortened_says_it_is_truncated_now() -> None:
    search = found(search_result(ARTIFACT, "line 99", 20), SEARCH_TOOL)
    assert search.payload is not None and search.payload["truncated"] is False
    data = json.loads(shortened(search, 0).text)
    assert (data["matches"], data["truncated"]) == ([], True)


def test_matches_that_fill_the_limit_exactly_are_kept() -> None:
    search = found(search_result(ARTIFACT, "line 1", 20), SEARCH_TOOL)
    contexts = [len(m["context"]) for m in search.payload["matches"]]  # type: ignore[index]
    data = json.loads(shortened(search, contexts[0] + contexts[1]).text)
    assert data["matches"] == search.payload["matches"][:2]  # type: ignore[index]


def test_a_search_shortened_to_nothing_keeps_no_match_however_short() -> None:
    search = found({"matches": [{"offset": 0, "context": "x"}], "total_matches": 1}, SEARCH_TOOL)
    data = json.loads(shortened(search, 0).text)
    assert (data["matches"], data["truncated"]) == ([], True)
