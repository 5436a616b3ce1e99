"""Hypothesis strategies for OpenAI chat-completions conversations (valid and deliberately broken).

Used by the conversation tests and by the pipeline's property tests.

* ``conversations(...)`` -> ``list[dict]``: a structurally valid ``messages`` list.
* ``requests(...)`` -> ``dict``: a whole request body (``model``, ``messages``, unknown fields...).
* ``broken_conversations(...)`` -> ``Broken``: a valid list with exactly one deliberate breakage
  and the ``(index, tool_call_id)`` pairs the parser must report for it.
* ``big_text(...)`` -> ``str``: text of a drawn size (tiny to ~30k chars), cheap to generate.

Generated messages are fresh objects on every draw: tests may mutate them.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

Message = dict[str, Any]

WORDS = (
    "alpha", "beta", "gamma", "delta", "file", "error", "line", "def", "return", "import",
    "the", "of", "result", "value", "None", "True", "{", "}", "(", ")", "\n", "    ", "é", "数据",
    "🙂", "\"quoted\"", "path/to/module.py", "0x1F", "42", "-", "=", "==", "TODO", "ok",
)  # fmt: skip
TOOL_NAMES = ("read_file", "run_shell", "search_code", "write_file", "http_get")
MODEL_NAMES = ("gpt-4o-mini", "gpt-4.1", "claude-3-5-sonnet", "llama-3.1-8b")

# Size classes of tool results: (min_chars, max_chars). Weights come from their repetition.
_RESULT_SIZES = ((0, 40), (0, 40), (40, 600), (40, 600), (600, 5_000), (5_000, 30_000))


def _phrase(seed: int) -> str:
    """1..12 words chosen by the digits of ``seed`` in base len(WORDS) (one draw per phrase)."""
    base = len(WORDS)
    count = seed % 12 + 1
    seed //= 12
    out = []
    for _ in range(count):
        seed, digit = divmod(seed, base)
        out.append(WORDS[digit])
    return " ".join(out)


words = st.integers(0, 2**63).map(_phrase)
_seed = st.integers(0, 2**64 - 1)  # one draw that deterministically decides several details


def _extra_value(k: int) -> Any:
    """A fresh unknown-field value of one of several JSON shapes, chosen by ``k``."""
    choice = k % 6
    if choice == 0:
        return None
    if choice == 1:
        return k - 2**40
    if choice == 2:
        return _phrase(k)
    if choice == 3:
        return {"trace": _phrase(k // 6), "n": k % 10, "nested": {"ok": True}}
    if choice == 4:
        return [k % 10, 0.5, "x"]
    return False


@st.composite
def big_text(draw: st.DrawFn, min_chars: int = 0, max_chars: int = 30_000) -> str:
    """Text of a drawn length, built by repeating a drawn seed phrase (fast at any size)."""
    return _repeat(_phrase(draw(_seed)), draw(st.integers(min_chars, max_chars)))


def _repeat(phrase: str, length: int) -> str:
    chunk = phrase + " " + str(length) + " "
    return (chunk * (length // len(chunk) + 1))[:length]


def _extras_from(seed: int, target: dict[str, Any], names: tuple[str, ...]) -> None:
    """One time in five (by ``seed``), add one unknown field named from ``names`` to ``target``."""
    pick = seed % (5 * len(names))
    if pick < len(names):
        target[names[pick]] = _extra_value(seed // (5 * len(names)))


def _maybe_extras(draw: st.DrawFn, target: dict[str, Any], names: tuple[str, ...]) -> None:
    _extras_from(draw(_seed), target, names)


_MSG_EXTRAS = ("x_custom", "x_trace_id", "metadata_x")
_ASSISTANT_EXTRAS = (*_MSG_EXTRAS, "refusal", "reasoning_content")


def _user_message(draw: st.DrawFn) -> Message:
    shape = draw(st.integers(0, 5))
    content: Any
    if shape <= 2:
        content = draw(words)
    else:
        content = [{"type": "text", "text": draw(words)} for _ in range(shape - 2)]
        if draw(st.booleans()):
            url = "https://example.com/img/" + str(draw(st.integers(0, 999))) + ".png"
            content.insert(1, {"type": "image_url", "image_url": {"url": url, "detail": "low"}})
    message: Message = {"role": "user", "content": content}
    if shape == 0:
        message["name"] = "alice"
    _maybe_extras(draw, message, _MSG_EXTRAS)
    return message


def _assistant_text(draw: st.DrawFn) -> Message:
    message: Message = {"role": "assistant", "content": draw(words)}
    _maybe_extras(draw, message, _ASSISTANT_EXTRAS)
    return message


def _tool_call(draw: st.DrawFn, call_id: str) -> dict[str, Any]:
    seed = draw(_seed)
    name = TOOL_NAMES[seed % len(TOOL_NAMES)]
    seed //= len(TOOL_NAMES)
    args = json.dumps({"path": _phrase(seed >> 16), "n": seed % 100})
    call: dict[str, Any] = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": args},
    }
    _extras_from(seed % 1000, call, ("x_call_meta", "index"))
    return call


def _tool_result(draw: st.DrawFn, call: dict[str, Any], max_chars: int) -> Message:
    """A result of a drawn size class: length, shape, name and extras come from one seed."""
    lo, hi = draw(st.sampled_from(_RESULT_SIZES))
    hi = min(hi, max_chars)
    lo = min(lo, hi)
    seed = draw(_seed)
    length = lo + seed % (hi - lo + 1)
    seed //= hi - lo + 1
    shape = seed % 8
    text = _repeat(_phrase(seed // 8000), length)
    result: Message = {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": [{"type": "text", "text": text}] if shape == 0 else text,
    }
    if shape <= 2:
        result["name"] = call["function"]["name"]
    _extras_from(seed // 8 % 1000, result, _MSG_EXTRAS)
    return result


def _tool_exchange(
    draw: st.DrawFn, ids: Iterator[int], max_result_chars: int, max_parallel: int
) -> list[Message]:
    """An assistant message with 1..max_parallel tool calls, then one result per call."""
    count = draw(st.integers(1, max_parallel))
    calls = [_tool_call(draw, f"call_{next(ids)}") for _ in range(count)]
    content = draw(st.one_of(st.none(), words)) if draw(st.integers(0, 3)) == 0 else None
    assistant: Message = {"role": "assistant", "content": content, "tool_calls": calls}
    _maybe_extras(draw, assistant, _ASSISTANT_EXTRAS)
    order = draw(st.permutations(range(count))) if count > 1 else [0]
    results = [_tool_result(draw, calls[k], max_result_chars) for k in order]
    return [assistant, *results]


def _legacy_function_exchange(draw: st.DrawFn) -> list[Message]:
    name = draw(st.sampled_from(TOOL_NAMES))
    call = {"name": name, "arguments": json.dumps({"q": draw(words)})}
    return [
        {"role": "assistant", "content": None, "function_call": call},
        {
            "role": "function",
            "name": name,
            "content": _repeat(draw(words), draw(st.integers(0, 2_000))),
        },
    ]


@dataclass(frozen=True)
class _Shape:
    max_steps: int
    max_result_chars: int
    max_parallel: int
    legacy_functions: bool


def _turn_tail(draw: st.DrawFn, ids: Iterator[int], shape: _Shape) -> list[Message]:
    """What follows a user message: tool exchanges and assistant replies, in a plausible order."""
    out: list[Message] = []
    for _ in range(draw(st.integers(0, shape.max_steps))):
        kind = draw(st.integers(0, 5 if shape.legacy_functions else 4))
        if kind <= 2:
            out.extend(_tool_exchange(draw, ids, shape.max_result_chars, shape.max_parallel))
        elif kind <= 4:
            out.append(_assistant_text(draw))
        else:
            out.extend(_legacy_function_exchange(draw))
    return out


@st.composite
def instruction_message(draw: st.DrawFn) -> Message:
    """A system or developer message placed inside the conversation (after its prefix)."""
    role = draw(st.sampled_from(("system", "developer")))
    message: Message = {"role": role, "content": "Reminder: " + draw(words)}
    _maybe_extras(draw, message, _MSG_EXTRAS)
    return message


@st.composite
def conversations(
    draw: st.DrawFn,
    *,
    min_turns: int = 0,
    max_turns: int = 6,
    max_steps: int = 4,
    max_result_chars: int = 30_000,
    max_parallel: int = 4,
    legacy_functions: bool = False,
    require_tool_exchange: bool = False,
    instructions: bool = False,
) -> list[Message]:
    """A structurally valid ``messages`` list.

    Optional system/developer prefix, optional leading assistant greeting, then ``min_turns`` to
    ``max_turns`` turns (user message + up to ``max_steps`` replies/tool exchanges). Tool call ids
    are ``call_<n>``, unique within the list. ``require_tool_exchange`` guarantees at least one
    exchange with tool_calls. ``instructions`` lets a turn carry a mid-conversation
    system/developer message (`instruction_message`) between its units. The list is never empty.
    """
    ids = itertools.count(1)
    shape = _Shape(max_steps, max_result_chars, max_parallel, legacy_functions)
    messages: list[Message] = []
    prefix = draw(st.integers(0, 5))
    for role in (
        (("system",), ("developer",), ("system", "developer"))[prefix - 3] if prefix >= 3 else ()
    ):
        system: Message = {"role": role, "content": draw(words)}
        _maybe_extras(draw, system, _MSG_EXTRAS)
        messages.append(system)
    if draw(st.integers(0, 4)) == 0:
        messages.append({"role": "assistant", "content": "Hello! " + draw(words)})
    for _ in range(draw(st.integers(min_turns, max_turns))):
        messages.append(_user_message(draw))
        if instructions and draw(st.integers(0, 2)) == 0:
            messages.append(draw(instruction_message()))
        messages.extend(_turn_tail(draw, ids, shape))
    if require_tool_exchange and not any(m.get("tool_calls") for m in messages):
        messages.append(_user_message(draw))
        messages.extend(_tool_exchange(draw, ids, max_result_chars, max_parallel))
    if not messages:
        messages.append(_user_message(draw))
    return messages


@st.composite
def requests(draw: st.DrawFn, /, **conversation_kwargs: Any) -> dict[str, Any]:
    """A chat-completions request body around ``conversations(**conversation_kwargs)``."""
    body: dict[str, Any] = {
        "model": draw(st.sampled_from(MODEL_NAMES)),
        "messages": draw(conversations(**conversation_kwargs)),
    }
    if draw(st.booleans()):
        body["stream"] = draw(st.booleans())
    if draw(st.booleans()):
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"The {name} tool.",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                },
            }
            for name in TOOL_NAMES
        ]
    if draw(st.booleans()):
        body["max_tokens"] = draw(st.integers(1, 4096))
    _maybe_extras(draw, body, ("x_custom", "metadata", "user"))
    return body


@dataclass(frozen=True)
class Broken:
    """A conversation with one deliberate breakage and the problems it must produce."""

    messages: list[Message]
    kind: str
    expected: frozenset[tuple[int, str | None]]  # (message index, tool_call_id) per problem


def _exchanges(messages: list[Message]) -> list[tuple[int, int]]:
    """(assistant index, call count) of each tool exchange, found without the parser under test."""
    return [(i, len(m["tool_calls"])) for i, m in enumerate(messages) if m.get("tool_calls")]


def _drop_result(draw: st.DrawFn, messages: list[Message], a: int, k: int) -> Broken:
    pos = a + 1 + draw(st.integers(0, k - 1))
    call_id = messages.pop(pos)["tool_call_id"]
    return Broken(messages, "drop_result", frozenset({(a, call_id)}))


def _orphan_result(draw: st.DrawFn, messages: list[Message], a: int, k: int) -> Broken:
    first = next(i for i, m in enumerate(messages) if m["role"] not in ("system", "developer"))
    pos = draw(st.one_of(st.integers(a + 1, a + k + 1), st.integers(first, len(messages))))
    orphan = {"role": "tool", "tool_call_id": "call_orphan", "content": "stray"}
    messages.insert(pos, orphan)
    return Broken(messages, "orphan_result", frozenset({(pos, "call_orphan")}))


def _duplicate_id(draw: st.DrawFn, messages: list[Message], a: int, k: int) -> Broken:
    calls = messages[a]["tool_calls"]
    twin = copy.deepcopy(calls[draw(st.integers(0, k - 1))])
    calls.insert(draw(st.integers(0, k)), twin)  # either copy may come first: same (a, id)
    return Broken(messages, "duplicate_id", frozenset({(a, twin["id"])}))


def _duplicate_result(draw: st.DrawFn, messages: list[Message], a: int, k: int) -> Broken:
    src = a + 1 + draw(st.integers(0, k - 1))
    pos = draw(st.integers(src + 1, a + k + 1))
    messages.insert(pos, copy.deepcopy(messages[src]))
    return Broken(messages, "duplicate_result", frozenset({(pos, messages[src]["tool_call_id"])}))


def _result_before_call(draw: st.DrawFn, messages: list[Message], a: int, k: int) -> Broken:
    result = messages.pop(a + 1 + draw(st.integers(0, k - 1)))
    messages.insert(a, result)
    call_id = result["tool_call_id"]
    return Broken(messages, "result_before_call", frozenset({(a, call_id), (a + 1, call_id)}))


_BREAKERS: dict[str, Callable[[st.DrawFn, list[Message], int, int], Broken]] = {
    "drop_result": _drop_result,
    "orphan_result": _orphan_result,
    "duplicate_id": _duplicate_id,
    "duplicate_result": _duplicate_result,
    "result_before_call": _result_before_call,
}
BREAKAGE_KINDS = tuple(_BREAKERS)


@st.composite
def broken_conversations(
    draw: st.DrawFn, /, kinds: tuple[str, ...] = BREAKAGE_KINDS, **conversation_kwargs: Any
) -> Broken:
    """A valid conversation (with >= 1 tool exchange) broken in exactly one way from ``kinds``.

    ``expected`` holds every ``(index, tool_call_id)`` the parser must report, and nothing else:
    drop_result -> (assistant, id); orphan_result -> (inserted tool message, "call_orphan");
    duplicate_id -> (assistant, id); duplicate_result -> (the second result, id);
    result_before_call -> (moved result, id) and (assistant, id).
    """
    conversation_kwargs.setdefault("max_result_chars", 2_000)
    messages = draw(conversations(require_tool_exchange=True, **conversation_kwargs))
    a, k = draw(st.sampled_from(_exchanges(messages)))
    kind = draw(st.sampled_from(kinds))
    return _BREAKERS[kind](draw, messages, a, k)
