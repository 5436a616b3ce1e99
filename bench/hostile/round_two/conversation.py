"""Agent histories for the round-two phases, in each wire format: every turn a user request, a
`bash` call, its result and the assistant's answer, then a last question.

`FORMATS` names, per format, the completion route, the dry run's route and the body builder.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

SYSTEM = "You are a coding agent: run tools, then answer."
LAST = "Now tell me what we found."
CHAT_MODEL = "gpt-4o"
CLAUDE_MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True)
class Turn:
    ask: str
    call_id: str
    arguments: str
    result: str
    answer: str


def history(results: Sequence[str]) -> list[Turn]:
    """One turn per tool result, in order."""
    return [
        Turn(f"Step {t}: run the tests for KEY{t}.", f"call_{t}",
             json.dumps({"cmd": f"pytest -k t{t}"}), result, f"KEY{t} is checked.")
        for t, result in enumerate(results)
    ]  # fmt: skip


def chat_body(turns: Sequence[Turn]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for turn in turns:
        call = {"id": turn.call_id, "type": "function",
                "function": {"name": "bash", "arguments": turn.arguments}}  # fmt: skip
        messages += [
            {"role": "user", "content": turn.ask},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": turn.call_id, "content": turn.result},
            {"role": "assistant", "content": turn.answer},
        ]
    messages.append({"role": "user", "content": LAST})
    return {"model": CHAT_MODEL, "messages": messages}


def responses_body(turns: Sequence[Turn]) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for turn in turns:
        answer = [{"type": "output_text", "text": turn.answer}]
        items += [
            {"type": "message", "role": "user", "content": turn.ask},
            {"type": "function_call", "call_id": turn.call_id, "name": "bash",
             "arguments": turn.arguments},
            {"type": "function_call_output", "call_id": turn.call_id, "output": turn.result},
            {"type": "message", "role": "assistant", "content": answer},
        ]  # fmt: skip
    items.append({"type": "message", "role": "user", "content": LAST})
    return {"model": CHAT_MODEL, "instructions": SYSTEM, "input": items}


def messages_body(turns: Sequence[Turn]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for turn in turns:
        use = {"type": "tool_use", "id": turn.call_id, "name": "bash",
               "input": json.loads(turn.arguments)}  # fmt: skip
        result = {"type": "tool_result", "tool_use_id": turn.call_id, "content": turn.result}
        messages += [
            {"role": "user", "content": turn.ask},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": turn.answer},
        ]
    messages.append({"role": "user", "content": LAST})
    return {"model": CLAUDE_MODEL, "max_tokens": 1024, "system": SYSTEM, "messages": messages}


@dataclass(frozen=True)
class Format:
    completion: str
    dry_run: str
    body: Callable[[Sequence[Turn]], dict[str, Any]]


FORMATS = {
    "chat": Format("/v1/chat/completions", "/v1/context/prepare", chat_body),
    "responses": Format(
        "/v1/responses", "/v1/context/prepare?format=openai_responses", responses_body
    ),
    "messages": Format(
        "/v1/messages", "/v1/context/prepare?format=anthropic_messages", messages_body
    ),
}
