"""A scripted coding-agent session with the real `anthropic` SDK, sent the way Claude Code sends
it, against the caching fake (`fakes.caching.CachingUpstream`): what each turn billed.

The client keeps a system prompt and three tools, marks two cache breakpoints per request (the
end of the system prompt, and the last block of the last message, which moves every turn; or
none, `marks=False`, leaving them to the proxy's `cache_marks: auto`), and
sends each request whole (`messages.create`, JSON: the answer's `x-ctxproxy-*` headers carry its
cost). The fake plays the model: three `bash` calls, then a short report, then the next
instruction from the user, and so on; each command's output is deterministic text of 1.5 to 12
KB. Used by `tests/e2e/test_e2e_cost_session.py` and `python -m bench.quality.cost_session`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic
from fakes.anthropic import text_block, tool_use_block
from fakes.caching import CachingUpstream
from fakes.records import Recorded

MODEL = "claude-haiku-4-5"
SYSTEM_TEXT = (
    "You are a coding agent working in a Python repository. Read before you edit, keep the "
    "repository's conventions, run the tests after every change and report what you did. "
) * 40
TOOLS: list[dict[str, Any]] = [
    {
        "name": name,
        "description": f"{description} " * 6,
        "input_schema": {"type": "object", "properties": {arg: {"type": "string"}}},
    }
    for name, description, arg in (
        ("bash", "Run a shell command in the repository and return its output.", "command"),
        ("read_file", "Read a file of the repository, with line numbers.", "path"),
        ("edit_file", "Replace a span of a file with new text.", "path"),
    )
]
OUTPUT_CHARS = (1_800, 3_200, 6_000, 2_400, 12_000, 2_000, 4_500)
EPHEMERAL = {"type": "ephemeral"}


def command_output(turn: int) -> str:
    """What the `bash` call of `turn` printed: deterministic, code-like, of a size that varies."""
    size = OUTPUT_CHARS[turn % len(OUTPUT_CHARS)]
    lines, total, n = [], 0, 0
    while total < size:
        line = f"src/pkg/mod_{turn}.py:{n + 1}: value_{n} = compute({(turn * 7919 + n) % 10007})"
        lines.append(line)
        total += len(line) + 1
        n += 1
    return "\n".join(lines)


class ScriptedModel:
    """The fake's answers: `bash` three times, then a report (a counter of the requests it saw,
    not of the messages, which the proxy may have dropped)."""

    def __init__(self) -> None:
        self.answered = 0

    def __call__(self, record: Recorded, body: dict[str, Any]) -> list[dict[str, Any]]:
        self.answered += 1
        step = self.answered
        if step % 4 == 0:
            return [text_block(f"Step {step}: the change is in and the tests pass.")]
        command = {"command": f"pytest -q tests/test_mod_{step}.py"}
        call = tool_use_block(f"toolu_{step:04d}", "bash", command)
        return [text_block(f"Running step {step}."), call]


@dataclass
class Turn:
    """One request of the session: the proxy's headers and the fake's reported usage."""

    number: int
    headers: dict[str, str]
    reported: dict[str, Any]

    @property
    def input(self) -> int:
        return int(self.reported["input_tokens"]) + self.cache_read + self.cache_write

    @property
    def cache_read(self) -> int:
        return int(self.reported["cache_read_input_tokens"])

    @property
    def cache_write(self) -> int:
        return int(self.reported["cache_creation_input_tokens"])


@dataclass
class Session:
    turns: list[Turn] = field(default_factory=list)

    def cached_share(self, after: int = 3) -> float:
        """Cache-read tokens over input tokens of the turns after the first `after`."""
        later = [t for t in self.turns if t.number > after]
        total = sum(t.input for t in later)
        return sum(t.cache_read for t in later) / total if total else 0.0

    def header_sum(self, name: str) -> float:
        return sum(float(t.headers[name]) for t in self.turns if name in t.headers)


def with_breakpoints(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with a breakpoint on the last block of the last message (as Claude Code)."""
    marked = copy.deepcopy(list(messages))
    last = marked[-1]
    content = last["content"]
    if isinstance(content, str):
        content = last["content"] = [text_block(content)]
    content[-1]["cache_control"] = EPHEMERAL
    return marked


def system_blocks() -> list[dict[str, Any]]:
    return [{"type": "text", "text": SYSTEM_TEXT, "cache_control": EPHEMERAL}]


async def run_session(
    client: anthropic.AsyncAnthropic, fake: CachingUpstream, turns: int = 40, *, marks: bool = True
) -> Session:
    """`turns` requests of one conversation; the fake must play `ScriptedModel`. Without
    `marks` the client places no cache breakpoint (the system prompt a plain string), as many
    SDK users do."""
    session = Session()
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the failing tests in src/pkg, one module at a time."}
    ]
    for number in range(1, turns + 1):
        raw = await client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=1024,
            system=system_blocks() if marks else SYSTEM_TEXT,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            messages=with_breakpoints(messages) if marks else messages,  # type: ignore[arg-type]
        )
        answer = await raw.parse()
        headers = {k: v for k, v in raw.headers.items() if k.startswith("x-ctxproxy-")}
        session.turns.append(Turn(number, headers, dict(fake.reported[-1])))
        content = answer.model_dump(mode="json", exclude_none=True)["content"]
        messages.append({"role": "assistant", "content": content})
        calls = [block for block in content if block["type"] == "tool_use"]
        if calls:
            results = [
                {"type": "tool_result", "tool_use_id": c["id"], "content": command_output(number)}
                for c in calls
            ]
            messages.append({"role": "user", "content": results})
        else:
            messages.append({"role": "user", "content": f"Good. Now module {number + 1}."})
    return session
