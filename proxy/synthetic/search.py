"""`search_context_artifact`: a case-insensitive literal search in a stored artifact.

Linear in the artifact's size whatever the pattern (no user-supplied regular expressions); a
search over a large artifact runs in a worker thread, and the searches of one round share a
budget of characters scanned (`RoundBudget`), so no prompt can stall the event loop or the
process. Its budget rule: a search keeps its first matches.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from proxy.artifacts.search import search_result
from proxy.synthetic.arguments import int_arg, str_arg
from proxy.synthetic.base import (
    UNTRUSTED,
    ArgumentError,
    CallContext,
    CallStatus,
    SyntheticTool,
    ToolResult,
    ToolSpec,
)
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.stored import artifact_id_schema, stored_artifact

SEARCH_TOOL = "search_context_artifact"
DEFAULT_MAX_RESULTS = 10
MAX_RESULTS_CAP = 50
MAX_PATTERN_CHARS = 1_000
INLINE_SEARCH_CHARS = 256 * 1024  # larger artifacts are searched in a worker thread


class SearchArtifact(SyntheticTool):
    name = SEARCH_TOOL

    def spec(self, max_page_chars: int) -> ToolSpec:
        return ToolSpec(
            name=SEARCH_TOOL,
            description="Find a literal text (case-insensitive) in removed content; returns "
            f"offsets for {READ_TOOL} and context. {UNTRUSTED}",
            parameters={
                "type": "object",
                "properties": {
                    "artifact_id": artifact_id_schema(),
                    "pattern": {"type": "string", "minLength": 1, "maxLength": MAX_PATTERN_CHARS},
                    "max_results": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_RESULTS_CAP,
                        "default": DEFAULT_MAX_RESULTS,
                    },
                },
                "required": ["artifact_id", "pattern"],
                "additionalProperties": False,
            },
        )

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        artifact_id = str_arg(args, "artifact_id")
        max_results = int_arg(args, "max_results", DEFAULT_MAX_RESULTS, minimum=1)
        max_results = min(max_results, MAX_RESULTS_CAP)
        pattern = _pattern_arg(args)
        artifact = await stored_artifact(self, call, artifact_id)
        if isinstance(artifact, ToolResult):
            return artifact
        size = len(artifact.content)
        if not call.budget.take_search(size):
            return self.error(
                CallStatus.search_budget_exhausted,
                "The searches of this round have scanned all the text one round may; read pages "
                "or search again in the next round.",
            )
        search = functools.partial(search_result, artifact, pattern, max_results)
        if size <= INLINE_SEARCH_CHARS:
            return self.found(search())
        if call.worker is None:
            return self.found(await asyncio.to_thread(search))
        return self.found(await call.worker.run(search))

    def result_chars(self, payload: dict[str, Any]) -> int:
        return sum(len(m.get("context", "")) for m in _matches(payload))

    def shortened(self, payload: dict[str, Any], max_chars: int) -> dict[str, Any]:
        kept: list[Any] = []
        used = 0
        for match in _matches(payload):
            used += len(match.get("context", ""))
            if used > max_chars:
                break
            kept.append(match)
        return {**payload, "matches": kept, "truncated": True}


def _pattern_arg(args: dict[str, Any]) -> str:
    pattern = str_arg(args, "pattern")
    if not pattern:
        raise ArgumentError("`pattern` must not be empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ArgumentError(f"`pattern` is longer than {MAX_PATTERN_CHARS} characters")
    return pattern


def _matches(payload: dict[str, Any]) -> list[dict[str, Any]]:
    matches = payload.get("matches")
    if not isinstance(matches, list):
        return []
    return [m for m in matches if isinstance(m, dict)]
