"""The building blocks of the dry-run snapshot's hand-made requests (`dryrun_requests`): seeded
text (words, CJK), tool schemas, calls and results, an agent loop of N exchanges, the wire bytes."""

from __future__ import annotations

import json
import random
from typing import Any

_VOCABULARY = (
    "def return import class self value result error test build module cache index request "
    "response handler config path file line status pass fail assert expected actual token "
    "budget window policy stream chunk upstream proxy latency queue worker retry timeout "
    "the a of to in and for is on with that this from by at as it be are was or not"
)
_WORDS = _VOCABULARY.split()
_CJK = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你能"


def text(rng: random.Random, chars: int, *, cjk: bool = False) -> str:
    """Code/log-ish text of exactly `chars` characters."""
    out: list[str] = []
    size = 0
    while size < chars:
        if cjk:
            line = "".join(rng.choice(_CJK) for _ in range(rng.randint(8, 40)))
        else:
            line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12)))
        line = f"{rng.randint(1, 9999):>5}: {line}"
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)[:chars]


def tool(name: str, **params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {
                "type": "object",
                "properties": {k: {"type": t} for k, t in params.items()},
                "required": list(params),
            },
        },
    }


TOOLS = [
    tool("read_file", path="string"),
    tool("grep", pattern="string"),
    tool("todo_write", items="string"),
    tool("acme_lookup", id="string"),
    tool("fetch_url", url="string"),
    tool("run_tests", target="string"),
]


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def calls_msg(calls: list[dict[str, Any]], content: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": calls}


def result(call_id: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def agent(
    rng: random.Random,
    exchanges: int,
    sizes: tuple[int, int],
    *,
    names: list[str],
    prefix: str = "call",
    model: str = "gpt-4o",
) -> dict[str, Any]:
    """system + task + `exchanges` (user note, tool call, tool result) + a final user turn."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent. Use the tools."},
        {"role": "user", "content": "Task: make the test suite pass. " + text(rng, 300)},
    ]
    for n in range(exchanges):
        name = names[n % len(names)]
        cid = f"{prefix}_{n:03d}"
        note = text(rng, rng.randint(40, 200))
        messages.append({"role": "user", "content": f"Step {n}: {note}"})
        messages.append(calls_msg([call(cid, name, {"path": f"src/m{n}.py"})]))
        messages.append(result(cid, text(rng, rng.randint(*sizes))))
    messages.append({"role": "user", "content": "Now fix the failing test and explain why."})
    return {"model": model, "messages": messages, "tools": TOOLS}


def enc(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
