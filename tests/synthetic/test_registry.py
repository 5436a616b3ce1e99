"""The synthetic read/search tools, executed against a MemoryStore."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
from artifacts_harness import keyed
from synthetic_harness import call_tool

from proxy.artifacts import search as search_module
from proxy.artifacts.store import Artifact, MemoryStore, NewArtifact, StoreUnavailable
from proxy.synthetic import search as search_tool
from proxy.synthetic.base import CallStatus, RoundBudget, SearchWorker
from proxy.synthetic.read import HARD_MAX_PAGE_CHARS, READ_TOOL
from proxy.synthetic.registry import tool_specs
from proxy.synthetic.search import SEARCH_TOOL

SECRET = b"read-tool-test-secret-0123456789"
SCOPE = "tenant-a"
HANG_S = 30.0
"""Bounds a wait for the event loop: only a search that holds the loop takes it."""
LONG = "".join(f"{i:05d} ünïcødé ✓ 日本 🧪 line\n" for i in range(3000))  # ~90k chars
LOG = (
    "boot ok\nWARN disk 91%\nerror: connection reset\nretrying\n"
    "ERROR: connection reset again\nall good\nfinal Error here"
)


@pytest.fixture
async def store() -> MemoryStore:
    memory = MemoryStore(SECRET)
    items = keyed(
        memory, SCOPE, NewArtifact(LONG, "tool_result", {}), NewArtifact(LOG, "tool_result", {})
    )
    assert await memory.put_many(SCOPE, items, ttl_seconds=3600, max_per_scope=100) == set(items)
    return memory


async def call(store: Any, name: str, arguments: Any, *, page: int = 20_000) -> dict[str, Any]:
    read = await call_tool(store, SCOPE, name, arguments, max_page_chars=page)
    assert isinstance(read.text, str)
    result: dict[str, Any] = json.loads(read.text)
    error = result.get("error")
    assert read.status == (error["code"] if isinstance(error, dict) else CallStatus.found)
    return result


def error_code(result: dict[str, Any]) -> str:
    assert set(result) == {"error"}, result
    assert isinstance(result["error"]["message"], str) and result["error"]["message"]
    code: str = result["error"]["code"]
    return code


# -- read --------------------------------------------------------------------------------------


async def test_paging_reassembles_the_exact_original(store: MemoryStore) -> None:
    aid = store.artifact_id(SCOPE, LONG)
    pieces, offset, pages = [], 0, 0
    while True:
        result = await call(store, READ_TOOL, {"artifact_id": aid, "offset": offset}, page=7000)
        assert result["untrusted_content"] is True
        assert result["artifact_id"] == aid and result["offset"] == offset
        assert result["total_chars"] == len(LONG)
        assert len(result["content"]) <= 7000
        pieces.append(result["content"])
        pages += 1
        if result["next_offset"] is None:
            assert result["truncated"] is False
            break
        assert result["truncated"] is True and result["next_offset"] == offset + 7000
        offset = result["next_offset"]
    assert "".join(pieces) == LONG
    assert pages == -(-len(LONG) // 7000)


async def test_read_arguments_as_json_string_and_defaults(store: MemoryStore) -> None:
    aid = store.artifact_id(SCOPE, LOG)
    result = await call(store, READ_TOOL, json.dumps({"artifact_id": aid}))
    assert result["content"] == LOG and result["next_offset"] is None
    assert result["truncated"] is False and result["offset"] == 0


async def test_read_offsets_at_and_beyond_the_end(store: MemoryStore) -> None:
    aid = store.artifact_id(SCOPE, LOG)
    for offset in (len(LOG), len(LOG) + 1, 10**12):
        result = await call(store, READ_TOOL, {"artifact_id": aid, "offset": offset})
        assert result["content"] == "" and result["next_offset"] is None
        assert result["truncated"] is False and result["total_chars"] == len(LOG)
    last = await call(store, READ_TOOL, {"artifact_id": aid, "offset": len(LOG) - 3})
    assert last["content"] == LOG[-3:] and last["next_offset"] is None


async def test_max_chars_is_capped(store: MemoryStore) -> None:
    aid = store.artifact_id(SCOPE, LONG)
    capped = await call(store, READ_TOOL, {"artifact_id": aid, "max_chars": 50_000}, page=1000)
    assert len(capped["content"]) == 1000 and capped["next_offset"] == 1000
    hard = await call(store, READ_TOOL, {"artifact_id": aid, "max_chars": 10**9}, page=10**6)
    assert len(hard["content"]) == HARD_MAX_PAGE_CHARS
    small = await call(store, READ_TOOL, {"artifact_id": aid, "max_chars": 10, "offset": 5})
    assert small["content"] == LONG[5:15] and small["next_offset"] == 15
    integral_float = await call(store, READ_TOOL, {"artifact_id": aid, "max_chars": 10.0})
    assert integral_float["content"] == LONG[:10]


async def test_content_with_lone_surrogate_still_yields_json() -> None:
    memory = MemoryStore(SECRET)
    content = "before \ud800 after"
    item = keyed(memory, SCOPE, NewArtifact(content, "k", {}))
    await memory.put_many(SCOPE, item, ttl_seconds=60, max_per_scope=9)
    result = await call(memory, READ_TOOL, {"artifact_id": memory.artifact_id(SCOPE, content)})
    assert result["content"] == content


# -- search ------------------------------------------------------------------------------------


async def test_search_is_case_insensitive_with_exact_offsets(store: MemoryStore) -> None:
    aid = store.artifact_id(SCOPE, LOG)
    result = await call(store, SEARCH_TOOL, {"artifact_id": aid, "pattern": "error"})
    assert result["untrusted_content"] is True and result["pattern"] == "error"
    assert result["total_matches"] == 3 and result["truncated"] is False
    assert len(result["matches"]) == 3
    for match in result["matches"]:
        start = match["offset"]
        assert LOG[start : start + 5].lower() == "error"
        assert match["line"] == LOG.count("\n", 0, start) + 1
        assert LOG[start : start + 5] in match["context"]
        assert match["context"] in LOG
    assert [m["line"] for m in result["matches"]] == [3, 5, 7]


async def test_search_limits_results_and_gives_context(store: MemoryStore) -> None:
    aid = store.artifact_id(SCOPE, LONG)
    args = {"artifact_id": aid, "pattern": "LINE", "max_results": 4}
    result = await call(store, SEARCH_TOOL, args)
    assert result["total_matches"] == 3000 and result["truncated"] is True
    assert len(result["matches"]) == 4
    for match in result["matches"]:
        start = match["offset"]
        assert LONG[start : start + 4] == "line"
        assert match["line"] == LONG.count("\n", 0, start) + 1
        assert match["context"] == LONG[max(0, start - 120) : start + 4 + 120]
    many = await call(store, SEARCH_TOOL, {**args, "max_results": 10_000})
    assert len(many["matches"]) == 50  # capped


async def test_search_is_literal_and_cannot_backtrack() -> None:
    memory = MemoryStore(SECRET)
    content = "a" * 100_000 + "! then a.*b and (a+)+$ literally"
    aid = memory.artifact_id(SCOPE, content)
    item = {aid: NewArtifact(content, "k", {})}
    await memory.put_many(SCOPE, item, ttl_seconds=60, max_per_scope=9)
    # As a regular expression this pattern would backtrack for ages over the "a"s (the search
    # would not return); as text it is found once, where it stands.
    evil = await call(memory, SEARCH_TOOL, {"artifact_id": aid, "pattern": "(a+)+$"})
    assert evil["total_matches"] == 1
    assert content[evil["matches"][0]["offset"] :].startswith("(a+)+$")
    dot = await call(memory, SEARCH_TOOL, {"artifact_id": aid, "pattern": "a.*b"})
    assert dot["total_matches"] == 1
    none = await call(memory, SEARCH_TOOL, {"artifact_id": aid, "pattern": "zzz"})
    assert none["matches"] == [] and none["total_matches"] == 0 and none["truncated"] is False


async def _stored(content: str) -> tuple[MemoryStore, str]:
    memory = MemoryStore(SECRET)
    await memory.put_many(
        SCOPE, keyed(memory, SCOPE, NewArtifact(content, "k", {})), ttl_seconds=60, max_per_scope=9
    )
    return memory, memory.artifact_id(SCOPE, content)


@pytest.mark.parametrize(
    "pattern",
    ["A" * 999 + "b", "a" * 99 + "b", "Ab" * 400 + "c", "aaaaab"],
    ids=["A*999+b", "a*99+b", "(Ab)*400+c", "a*5+b"],
)
async def test_search_finds_no_near_miss_whatever_the_pattern(pattern: str) -> None:
    # Issue 11 item 1: an IGNORECASE regex scanned 1 MB of "a" for "A"*999+"b" in ~4 s. How
    # long a search takes is bench/availability.py's (scenario b); here, what it finds.
    memory, aid = await _stored("a" * 1_000_000 + "!")
    for _ in range(3):
        result = await call(memory, SEARCH_TOOL, {"artifact_id": aid, "pattern": pattern})
        assert result["total_matches"] == 0 and result["matches"] == []
    found = await call(memory, SEARCH_TOOL, {"artifact_id": aid, "pattern": "A!"})
    assert [m["offset"] for m in found["matches"]] == [999_999]  # the only "a!", found


async def test_a_large_search_leaves_the_event_loop_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each chunk of a large search waits until the event loop has run since the chunk before:
    off the loop it has, between every two chunks; on the loop the wait would block the loop,
    and time out (HANG_S only bounds that)."""
    content, pattern = "a" * 4_000_000 + "the End", "A" * 999 + "b"
    memory, aid = await _stored(content)
    ticked = threading.Event()
    chunks: list[bool] = []  # per chunk: whether the loop ran before it
    fold = search_module.fold

    def fold_after_a_tick(text: str) -> str:
        if text != pattern:  # a chunk of the content
            ticked.clear()
            chunks.append(ticked.wait(HANG_S))
        return fold(text)

    async def tick() -> None:
        while True:
            ticked.set()
            await asyncio.sleep(0.001)

    monkeypatch.setattr(search_module, "fold", fold_after_a_tick)
    ticker = asyncio.create_task(tick())
    try:
        result = await call(memory, SEARCH_TOOL, {"artifact_id": aid, "pattern": pattern})
    finally:
        ticker.cancel()
    assert result["total_matches"] == 0
    assert len(chunks) == -(-len(content) // search_module.SEARCH_CHUNK_CHARS) == 4
    assert all(chunks), chunks  # the loop ran before each chunk


async def test_the_searches_of_one_round_share_a_budget() -> None:
    memory, aid = await _stored("0123456789" * 10)
    budget = RoundBudget(search_chars=250)
    args = {"artifact_id": aid, "pattern": "9"}
    for _ in range(2):
        searched = await call_tool(
            memory, SCOPE, SEARCH_TOOL, args, max_page_chars=100, budget=budget
        )
        found = json.loads(searched.text)
        assert found["total_matches"] == 10
    refused_read = await call_tool(
        memory, SCOPE, SEARCH_TOOL, args, max_page_chars=100, budget=budget
    )
    assert refused_read.status is CallStatus.search_budget_exhausted
    refused = json.loads(refused_read.text)
    assert error_code(refused) == "search_budget_exhausted"
    read = json.loads(
        (
            await call_tool(
                memory, SCOPE, READ_TOOL, {"artifact_id": aid}, max_page_chars=100, budget=budget
            )
        ).text
    )
    assert read["content"] == "0123456789" * 10  # reads are not searches
    fresh = json.loads((await call_tool(memory, SCOPE, SEARCH_TOOL, args, max_page_chars=100)).text)
    assert fresh["total_matches"] == 10  # without a budget: this call alone


async def test_a_round_makes_at_most_its_calls() -> None:
    memory, aid = await _stored("text")
    budget = RoundBudget(calls=2)
    reads = [
        await call_tool(
            memory, SCOPE, READ_TOOL, {"artifact_id": aid}, max_page_chars=100, budget=budget
        )
        for _ in range(3)
    ]
    assert [r.status for r in reads] == [CallStatus.found] * 2 + [CallStatus.too_many_calls]
    results = [json.loads(r.text) for r in reads]
    assert [r.get("content") for r in results[:2]] == ["text", "text"]
    assert error_code(results[2]) == "too_many_calls"


async def test_large_searches_of_an_app_queue_on_its_one_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    running = [0, 0]  # now, most at once
    real = search_tool.search_result

    def tracked(*args: Any) -> dict[str, Any]:
        running[0] += 1
        running[1] = max(running)
        seen.append(threading.current_thread().name)
        time.sleep(0.02)
        running[0] -= 1
        return real(*args)

    monkeypatch.setattr(search_tool, "search_result", tracked)
    memory, aid = await _stored("x" * (search_tool.INLINE_SEARCH_CHARS + 1))
    worker = SearchWorker()
    try:
        args = {"artifact_id": aid, "pattern": "x", "max_results": 1}
        results = await asyncio.gather(
            *(
                call_tool(memory, SCOPE, SEARCH_TOOL, args, max_page_chars=10, worker=worker)
                for _ in range(4)
            )
        )
    finally:
        worker.close()
    assert [json.loads(r.text)["total_matches"] for r in results] == [10_000] * 4
    assert running[1] == 1 and len(seen) == 4
    assert all(name.startswith("ctxproxy-search") for name in seen)


# -- errors are results ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        (READ_TOOL, "{not json"),
        (READ_TOOL, "[1, 2]"),
        (READ_TOOL, ""),
        (READ_TOOL, {}),
        (READ_TOOL, {"artifact_id": 123}),
        (READ_TOOL, {"artifact_id": "ID", "offset": -1}),
        (READ_TOOL, {"artifact_id": "ID", "offset": "5"}),
        (READ_TOOL, {"artifact_id": "ID", "offset": True}),
        (READ_TOOL, {"artifact_id": "ID", "offset": 1.5}),
        (READ_TOOL, {"artifact_id": "ID", "max_chars": 0}),
        (SEARCH_TOOL, {"artifact_id": "ID"}),
        (SEARCH_TOOL, {"artifact_id": "ID", "pattern": ""}),
        (SEARCH_TOOL, {"artifact_id": "ID", "pattern": 7}),
        (SEARCH_TOOL, {"artifact_id": "ID", "pattern": "x" * 1001}),
        (SEARCH_TOOL, {"artifact_id": "ID", "pattern": "x", "max_results": 0}),
        ("read_file", {"artifact_id": "ID"}),
    ],
)
async def test_invalid_arguments(store: MemoryStore, name: str, arguments: Any) -> None:
    if isinstance(arguments, dict) and arguments.get("artifact_id") == "ID":
        arguments = {**arguments, "artifact_id": store.artifact_id(SCOPE, LOG)}
    assert error_code(await call(store, name, arguments)) == "invalid_arguments"


async def test_unknown_foreign_and_expired_ids_read_as_not_found() -> None:
    clock = [1000.0]
    memory = MemoryStore(SECRET, clock=lambda: clock[0])
    item = NewArtifact("tenant A data", "k", {})
    await memory.put_many(SCOPE, keyed(memory, SCOPE, item), ttl_seconds=10, max_per_scope=9)
    other = keyed(memory, "tenant-b", item)
    await memory.put_many("tenant-b", other, ttl_seconds=10, max_per_scope=9)
    foreign = memory.artifact_id("tenant-b", item.content)
    for aid in ["art_" + "0" * 32, "nonsense", foreign]:
        for name, extra in ((READ_TOOL, {}), (SEARCH_TOOL, {"pattern": "data"})):
            result = await call(memory, name, {"artifact_id": aid, **extra})
            assert error_code(result) == "artifact_not_found"
            assert "tenant" not in result["error"]["message"]
    own = memory.artifact_id(SCOPE, item.content)
    assert (await call(memory, READ_TOOL, {"artifact_id": own}))["content"] == item.content
    clock[0] += 11
    assert error_code(await call(memory, READ_TOOL, {"artifact_id": own})) == "artifact_not_found"


class _BrokenStore:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def artifact_id(self, scope: str, content: str) -> str:
        return "art_" + "1" * 32

    async def put_many(
        self, scope: str, items: Mapping[str, NewArtifact], *, ttl_seconds: int, max_per_scope: int
    ) -> set[str]:
        return set()

    async def get(self, scope: str, artifact_id: str) -> Artifact | None:
        raise self.error

    async def ping(self) -> bool:
        return False

    async def close(self) -> None:
        return None


@pytest.mark.parametrize("error", [StoreUnavailable("down"), RuntimeError("bug")])
async def test_store_failure_is_a_result(error: Exception) -> None:
    broken = _BrokenStore(error)
    for name, args in ((READ_TOOL, {}), (SEARCH_TOOL, {"pattern": "x"})):
        result = await call(broken, name, {"artifact_id": "art_" + "1" * 32, **args})
        assert error_code(result) == "artifact_store_unavailable"


async def put_one(content: str) -> tuple[MemoryStore, str]:
    memory = MemoryStore(SECRET)
    aid = memory.artifact_id(SCOPE, content)
    await memory.put_many(
        SCOPE, {aid: NewArtifact(content, "k", {})}, ttl_seconds=60, max_per_scope=9
    )
    return memory, aid


@pytest.mark.parametrize(
    ("count", "total", "lower_bound"),
    [(9_999, 9_999, False), (10_000, 10_000, True), (10_001, 10_000, True)],
)
async def test_search_counts_matches_up_to_a_cap_then_says_so(
    count: int, total: int, lower_bound: bool
) -> None:
    memory, aid = await put_one("x," * count)
    result = await call(memory, SEARCH_TOOL, {"artifact_id": aid, "pattern": "X", "max_results": 2})
    assert result == {
        "artifact_id": aid,
        "pattern": "X",
        "matches": [
            {"offset": 0, "line": 1, "context": ("x," * 61)[:121]},
            {"offset": 2, "line": 1, "context": ("x," * 62)[:123]},
        ],
        "total_matches": total,
        "truncated": True,
        "untrusted_content": True,
        **({"total_matches_is_lower_bound": True} if lower_bound else {}),
    }


async def test_search_lines_count_a_leading_line_break() -> None:
    memory, aid = await put_one("\nfirst\n\nthird line")
    result = await call(memory, SEARCH_TOOL, {"artifact_id": aid, "pattern": "i"})
    assert [(m["offset"], m["line"]) for m in result["matches"]] == [(2, 2), (10, 4), (15, 4)]


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", "`pattern` must not be empty"),
        ("p" * 1_001, "`pattern` is longer than 1000 characters"),
        ("p" * 1_000, None),
    ],
)
async def test_search_pattern_length(pattern: str, message: str | None) -> None:
    memory, aid = await put_one("p" * 2_000)
    result = await call(memory, SEARCH_TOOL, {"artifact_id": aid, "pattern": pattern})
    if message is None:
        assert result["total_matches"] == 2  # non-overlapping
    else:
        assert result["error"]["message"] == message


# -- what the model is told --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (READ_TOOL, "{not json", "arguments are not valid JSON"),
        (READ_TOOL, "[1, 2]", "arguments must be a JSON object"),
        (READ_TOOL, {}, "`artifact_id` is required"),
        (READ_TOOL, {"artifact_id": 123}, "`artifact_id` must be a string"),
        (READ_TOOL, {"artifact_id": "ID", "offset": "5"}, "`offset` must be an integer"),
        (READ_TOOL, {"artifact_id": "ID", "offset": -1}, "`offset` must be >= 0"),
        (READ_TOOL, {"artifact_id": "ID", "max_chars": 0}, "`max_chars` must be >= 1"),
        (
            SEARCH_TOOL,
            {"artifact_id": "ID", "pattern": "x", "max_results": 0},
            "`max_results` must be >= 1",
        ),
        ("read_file", {"artifact_id": "ID"}, "unknown synthetic tool 'read_file'"),
    ],
)
async def test_invalid_arguments_say_what_is_wrong(
    store: MemoryStore, name: str, arguments: Any, message: str
) -> None:
    if isinstance(arguments, dict) and arguments.get("artifact_id") == "ID":
        arguments = {**arguments, "artifact_id": store.artifact_id(SCOPE, LOG)}
    result = await call(store, name, arguments)
    assert result == {"error": {"code": "invalid_arguments", "message": message}}


async def test_smallest_page_and_result_count_are_one(store: MemoryStore) -> None:
    aid = store.artifact_id(SCOPE, LOG)
    page = await call(store, READ_TOOL, {"artifact_id": aid, "max_chars": 1})
    assert page["content"] == LOG[0]
    one = {"artifact_id": aid, "pattern": "error", "max_results": 1}
    found = await call(store, SEARCH_TOOL, one)
    assert len(found["matches"]) == 1 and found["total_matches"] == 3


async def test_arguments_only_the_stdlib_parser_accepts(store: MemoryStore) -> None:
    """A model's integer too big for orjson still parses (then it is capped like any other)."""
    aid = store.artifact_id(SCOPE, LOG)
    arguments = f'{{"artifact_id": "{aid}", "max_chars": {10**30}}}'
    assert (await call(store, READ_TOOL, arguments))["content"] == LOG


async def test_a_lone_surrogate_is_escaped_so_the_result_is_valid_utf8() -> None:
    memory = MemoryStore(SECRET)
    content = "before \ud800 after"
    await memory.put_many(
        SCOPE, keyed(memory, SCOPE, NewArtifact(content, "k", {})), ttl_seconds=60, max_per_scope=9
    )
    aid = memory.artifact_id(SCOPE, content)
    result = await call_tool(memory, SCOPE, READ_TOOL, {"artifact_id": aid}, max_page_chars=100)
    raw = result.text
    raw.encode("utf-8")  # would raise on an unescaped surrogate
    assert "\\ud800" in raw


@pytest.mark.parametrize(
    ("error", "message", "logged"),
    [
        (
            StoreUnavailable("down"),
            "The artifact store is temporarily unavailable; try again later.",
            [],
        ),
        (
            RuntimeError("bug"),
            "The artifact store failed to answer.",
            [f"artifact store failed while executing {READ_TOOL}"],
        ),
    ],
)
async def test_store_failure_tells_the_model_and_logs_a_bug(
    error: Exception, message: str, logged: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    result = await call(_BrokenStore(error), READ_TOOL, {"artifact_id": "art_" + "1" * 32})
    assert result == {"error": {"code": "artifact_store_unavailable", "message": message}}
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == logged


def test_both_tools_take_the_artifact_id_as_a_string() -> None:
    for spec in tool_specs(5000):
        assert spec.parameters["properties"]["artifact_id"]["type"] == "string"
