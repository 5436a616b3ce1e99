"""What both fake APIs share: the turn script, the record of prepared bodies, a prompt cache.

The harness runs the fake, the recorder and the CLIs in one event loop, so the script's `cli`
and `turn` are set by the harness before each CLI invocation and read by the fake when it
answers. The fake decides from the request body itself where in the turn it is: no shell result
after the turn's user message yet -> call the shell; a shell result -> (optionally search the
offloaded artifact once, then) the final text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

SEQ_HEADER = "x-bench-seq"
"""Set by the recorder on every request it forwards: links a prepared body to its client request."""

COMMANDS = {
    1: "seq 1 6000",
    2: "ls -la && cat bench-data.log",
    3: "seq 1 4000 | sed 's/^/row /'",
}
"""The shell command the model runs in each turn: ~29 KB, ~24 KB and ~35 KB of output (the
third is over Claude Code's own 30,000-character limit, beyond which it saves the output to a
file and sends a `<persisted-output>` preview instead)."""

ARTIFACT_ID = re.compile(r"\bart_[A-Za-z0-9_\-]{8,}")
SIDE_TEXT = "Bench session"


@dataclass
class Script:
    """Where the harness is: which CLI, which turn (1-based), and the optional search round."""

    cli: str = ""
    turn: int = 0
    exercise_search: bool = False

    def command(self) -> str:
        return COMMANDS.get(self.turn, COMMANDS[1])

    def marker(self) -> str:
        """The words a final answer starts with (the harness looks for them in the CLI output)."""
        return f"BENCH-DONE {self.cli} turn {self.turn}"

    def final_text(self, seen_chars: int) -> str:
        return f"{self.marker()}: the model saw {seen_chars} chars of tool output."


@dataclass
class UpstreamRecord:
    """One request the fake received: the proxy's prepared body and how the fake answered."""

    seq: int | None
    path: str
    body: dict[str, Any]
    size: int
    cli: str
    turn: int
    answer: str
    """`tool_call`, `search_call`, `final`, `side`, or `other`."""
    headers: dict[str, str] = field(default_factory=dict)


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low


class PromptCache:
    """A provider prompt cache in miniature: the longest prefix (in chars of the canonical prompt)
    shared with any earlier prompt counts as cached, at about 4 chars a token."""

    def __init__(self) -> None:
        self._seen: list[str] = []

    def hit_chars(self, prompt: str) -> int:
        best = max((_common_prefix(prompt, s) for s in self._seen), default=0)
        self._seen.append(prompt)
        return best


@dataclass
class FakeLog:
    records: list[UpstreamRecord] = field(default_factory=list)
    cache: PromptCache = field(default_factory=PromptCache)

    def by_seq(self, seq: int) -> list[UpstreamRecord]:
        return [r for r in self.records if r.seq == seq]


def without_cache_control(value: Any) -> Any:
    """The value with every `cache_control` key removed (markers move; the prompt does not)."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value


def canonical_prompt(*parts: Any) -> str:
    return json.dumps(without_cache_control(list(parts)), ensure_ascii=False, sort_keys=False)


def approx_tokens(chars: int) -> int:
    return max(1, chars // 4)


def tool_output_text(value: Any) -> str:
    """The text of a tool result's content (a string, or a list of text blocks/parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(tool_output_text(v) for v in value)
    if isinstance(value, dict):
        for key in ("text", "output", "content"):
            if key in value:
                return tool_output_text(value[key])
    return ""


def search_arguments(tool_output: str) -> dict[str, Any] | None:
    """Arguments for one `search_context_artifact` call on the artifact a preview names."""
    found = ARTIFACT_ID.search(tool_output)
    if found is None:
        return None
    return {"artifact_id": found.group(0), "pattern": "5999", "max_results": 3}
