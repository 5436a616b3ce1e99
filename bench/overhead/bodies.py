"""Request bodies for the overhead benchmark: agent conversations with big tool results.

Every body is a chat-completion request for `gpt-4o`: a system prompt, the task, N older turns
(user note, assistant tool call, big tool result), then a fixed tail (two small tool exchanges and
the current user message). The older turns grow with the wanted size; the tail never changes, so
one tiny-window policy (bench/overhead/policies/overhead-offload.yaml) must offload *and* drop
turns on every size while the protected tail still fits. Deterministic: same size -> same bytes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

MODEL = "gpt-4o"
SIZES = {"2KB": 2 * 1024, "100KB": 100 * 1024, "1MB": 1024 * 1024}
_VOCABULARY = (
    "def return import class self value result error test build module cache index request "
    "response handler config path file line status pass fail assert expected actual token "
    "budget window policy stream chunk upstream proxy latency queue worker retry timeout "
    "the a of to in and for is on with that this from by at as it be are was or not"
)
_WORDS = _VOCABULARY.split()


def _text(rng: random.Random, chars: int) -> str:
    """Code-ish text of about `chars` characters (realistic tokens per char)."""
    out: list[str] = []
    size = 0
    while size < chars:
        line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12)))
        line = f"{rng.randint(1, 9999):>5}: {line}"
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)[:chars]


def _exchange(rng: random.Random, n: int, result_chars: int) -> list[dict[str, Any]]:
    call_id = f"call_{n:04d}"
    args = json.dumps({"path": f"src/module_{n}.py"})
    return [
        {"role": "user", "content": f"Step {n}: look at module {n} and tell me what fails."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": args},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": _text(rng, result_chars)},
    ]


def _tail(rng: random.Random) -> list[dict[str, Any]]:
    messages = _exchange(rng, 9000, 1000)
    messages.append({"role": "user", "content": "Now fix the failing test and explain why."})
    return messages


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


def build_body(size: int, *, stream: bool = False) -> bytes:
    """A request body of about `size` bytes (within a few hundred bytes)."""
    rng = random.Random(size)
    head = [
        {"role": "system", "content": "You are a careful coding agent. Use the tools."},
        {"role": "user", "content": "Task: make the test suite of this repository pass."},
    ]
    tail = _tail(random.Random(1))
    body: dict[str, Any] = {"model": MODEL, "messages": [], "tools": TOOLS, "max_tokens": 100}
    if stream:
        body["stream"] = True

    def encoded(middle: list[dict[str, Any]]) -> bytes:
        body["messages"] = head + middle + tail
        return json.dumps(body, separators=(",", ":")).encode()

    base = len(encoded([]))
    turns = max(1, (size - base) // 20_000 + 1)
    middle: list[dict[str, Any]] = []
    for n in range(turns):
        overhead = len(encoded([*middle, *_exchange(rng, n, 0)])) - len(encoded(middle))
        left = size - len(encoded(middle)) - overhead
        middle += _exchange(rng, n, max(200, left // (turns - n)))
    return encoded(middle)


def write_bodies(directory: Path, sizes: dict[str, int]) -> dict[tuple[str, bool], Path]:
    """Writes `<label>.json` and `<label>-stream.json`; returns {(label, stream): path}."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for label, size in sizes.items():
        for stream in (False, True):
            path = directory / f"{label}{'-stream' if stream else ''}.json"
            path.write_bytes(build_body(size, stream=stream))
            paths[label, stream] = path
    return paths
