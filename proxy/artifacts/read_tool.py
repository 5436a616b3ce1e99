"""Synthetic tools the proxy executes itself: page through and search stored artifacts.

`execute` always answers with a `ReadResult`: its status and the JSON text for the model; bad
arguments, unknown or foreign ids and store outages are results (`{"error": {"code", "message"}}`,
the code being the status), never exceptions. Unknown and
foreign ids read the same: not found. Search is a case-insensitive literal substring search (no
user-supplied regular expressions), linear in the artifact's size whatever the pattern; a search
over a large artifact runs in a worker thread, and the searches of one round share a budget of
characters scanned (`RoundBudget`), so no prompt can stall the event loop or the process.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from proxy.artifacts.search import search_result
from proxy.artifacts.store import Artifact, ArtifactStore, StoreUnavailable
from proxy.artifacts.tool_specs import (
    DEFAULT_MAX_RESULTS,
    HARD_MAX_PAGE_CHARS,
    MAX_PATTERN_CHARS,
    MAX_RESULTS_CAP,
    READ_TOOL,
    SEARCH_TOOL,
    ToolNames,
    ToolSpec,
    is_synthetic,
    names_avoiding,
    page_cap,
    tool_specs,
)

__all__ = [  # the tools' names and specs live in tool_specs; importable from here as before
    "HARD_MAX_PAGE_CHARS",
    "READ_TOOL",
    "SEARCH_TOOL",
    "ReadResult",
    "ReadStatus",
    "RoundBudget",
    "SearchWorker",
    "ToolNames",
    "ToolSpec",
    "execute",
    "is_synthetic",
    "names_avoiding",
    "page_cap",
    "read_result",
    "tool_specs",
]

INLINE_SEARCH_CHARS = 256 * 1024  # larger artifacts are searched in a worker thread
SEARCH_CHARS_PER_ROUND = 64_000_000  # characters the searches of one round may scan together
MAX_CALLS_PER_ROUND = 32  # synthetic calls one round may make (the rest answer too_many_calls)

_log = logging.getLogger("ctxproxy.read_tool")


class ReadStatus(StrEnum):
    """How one synthetic call ended: `found`, or the error code of its result."""

    found = "found"
    artifact_not_found = "artifact_not_found"
    invalid_arguments = "invalid_arguments"
    artifact_store_unavailable = "artifact_store_unavailable"
    too_many_calls = "too_many_calls"
    search_budget_exhausted = "search_budget_exhausted"


@dataclass(frozen=True)
class ReadResult:
    """One synthetic call's outcome: its status and the JSON text the model gets."""

    status: ReadStatus
    text: str
    payload: dict[str, Any] | None = None
    """The result as data when found (a page or a search's matches): what `shortened` trims."""


class _ArgumentError(Exception):
    pass


class RoundBudget:
    """The work the synthetic calls of one round may do together: calls, characters searched.

    One per round (the calls of a round run on one event loop, so taking from it needs no lock);
    a call beyond the cap is answered with `too_many_calls` (each one loads its artifact from the
    store), a search that would exceed the characters left with `search_budget_exhausted`.
    """

    def __init__(
        self, search_chars: int = SEARCH_CHARS_PER_ROUND, calls: int = MAX_CALLS_PER_ROUND
    ) -> None:
        self.search_chars_left = search_chars
        self.calls_left = calls

    def take_call(self) -> bool:
        if self.calls_left <= 0:
            return False
        self.calls_left -= 1
        return True

    def take_search(self, chars: int) -> bool:
        if chars > self.search_chars_left:
            return False
        self.search_chars_left -= chars
        return True


class SearchWorker:
    """The one thread an app's large searches run on, shared by all its requests.

    A search holds the GIL for each chunk it scans, so several at once on several threads starve
    the event loop of it (a probe's p99 was ~45 ms beside one busy search thread, ~150 ms beside
    four): they queue here instead. Without a worker, `execute` uses asyncio's default executor.
    """

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxproxy-search")

    async def run(self, search: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        return await asyncio.get_running_loop().run_in_executor(self._executor, search)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class _Read:
    artifact_id: str
    offset: int
    max_chars: int


@dataclass(frozen=True)
class _Search:
    artifact_id: str
    pattern: str
    max_results: int


async def execute(
    store: ArtifactStore,
    scope: str,
    name: str,
    arguments: str | dict[str, Any],
    *,
    max_page_chars: int,
    budget: RoundBudget | None = None,
    worker: SearchWorker | None = None,
) -> ReadResult:
    """Run one synthetic tool call for `scope`; never raises.

    `budget` is shared by the calls of one round (a fresh one when None: this call alone);
    `worker` runs large searches (asyncio's default executor when None)."""
    budget = budget or RoundBudget()
    if not budget.take_call():
        return _error(
            ReadStatus.too_many_calls,
            "This round already made as many calls as one round may; make this one in the next "
            "round.",
        )
    try:
        call = _parse_call(name, arguments, max_page_chars)
    except _ArgumentError as exc:
        return _error(ReadStatus.invalid_arguments, str(exc))
    try:
        artifact = await store.get(scope, call.artifact_id)
    except StoreUnavailable:
        return _error(
            ReadStatus.artifact_store_unavailable,
            "The artifact store is temporarily unavailable; try again later.",
        )
    except Exception:  # a store bug must not break the request; the model gets a result
        _log.exception("artifact store failed while executing %s", name)
        return _error(ReadStatus.artifact_store_unavailable, "The artifact store failed to answer.")
    if artifact is None:
        return _error(
            ReadStatus.artifact_not_found,
            f"No artifact {call.artifact_id!r} is available (unknown or expired).",
        )
    if isinstance(call, _Search):
        return await _search(artifact, call, budget, worker)
    return _found(read_result(artifact, call.offset, call.max_chars))


async def _search(
    artifact: Artifact, call: _Search, budget: RoundBudget, worker: SearchWorker | None
) -> ReadResult:
    size = len(artifact.content)
    if not budget.take_search(size):
        return _error(
            ReadStatus.search_budget_exhausted,
            "The searches of this round have scanned all the text one round may; read pages "
            "or search again in the next round.",
        )
    search = functools.partial(search_result, artifact, call.pattern, call.max_results)
    if size <= INLINE_SEARCH_CHARS:
        return _found(search())
    if worker is None:
        return _found(await asyncio.to_thread(search))
    return _found(await worker.run(search))


def _parse_call(name: str, arguments: str | dict[str, Any], max_page_chars: int) -> _Read | _Search:
    if not is_synthetic(name):
        raise _ArgumentError(f"unknown synthetic tool {name!r}")
    args = _parse_arguments(arguments)
    artifact_id = _str_arg(args, "artifact_id")
    if name == SEARCH_TOOL:
        max_results = _int_arg(args, "max_results", DEFAULT_MAX_RESULTS, minimum=1)
        return _Search(artifact_id, _pattern_arg(args), min(max_results, MAX_RESULTS_CAP))
    cap = page_cap(max_page_chars)
    offset = _int_arg(args, "offset", 0, minimum=0)
    return _Read(artifact_id, offset, min(_int_arg(args, "max_chars", cap, minimum=1), cap))


def read_result(artifact: Artifact, offset: int, max_chars: int) -> dict[str, Any]:
    """One page of `artifact` from `offset` (characters); `next_offset` is null at the end."""
    total = len(artifact.content)
    page = artifact.content[offset : offset + max_chars]
    end = min(offset, total) + len(page)
    next_offset = end if end < total else None
    return {
        "artifact_id": artifact.id,
        "offset": offset,
        "content": page,
        "next_offset": next_offset,
        "total_chars": total,
        "truncated": next_offset is not None,
        "untrusted_content": True,
    }


def _parse_arguments(arguments: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            parsed: Any = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            try:
                parsed = json.loads(arguments)
            except (ValueError, RecursionError):
                raise _ArgumentError("arguments are not valid JSON") from None
    else:
        parsed = arguments
    if not isinstance(parsed, dict):
        raise _ArgumentError("arguments must be a JSON object")
    return parsed


def _str_arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if value is None:
        raise _ArgumentError(f"`{key}` is required")
    if not isinstance(value, str):
        raise _ArgumentError(f"`{key}` must be a string")
    return value


def _int_arg(args: dict[str, Any], key: str, default: int, *, minimum: int) -> int:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # some models write 200.0
    if isinstance(value, bool) or not isinstance(value, int):
        raise _ArgumentError(f"`{key}` must be an integer")
    if value < minimum:
        raise _ArgumentError(f"`{key}` must be >= {minimum}")
    return value


def _pattern_arg(args: dict[str, Any]) -> str:
    pattern = _str_arg(args, "pattern")
    if not pattern:
        raise _ArgumentError("`pattern` must not be empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise _ArgumentError(f"`pattern` is longer than {MAX_PATTERN_CHARS} characters")
    return pattern


def _error(status: ReadStatus, message: str) -> ReadResult:
    return ReadResult(status, encode_result({"error": {"code": status.value, "message": message}}))


def _found(value: dict[str, Any]) -> ReadResult:
    return ReadResult(ReadStatus.found, encode_result(value), value)


def encode_result(value: dict[str, Any]) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # lone surrogates or huge ints: the stdlib escapes them losslessly
        return json.dumps(value, ensure_ascii=True)
