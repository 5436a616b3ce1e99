"""The requests of `bench/hostile/run_messages.py` (Anthropic Messages) and the checks applied to
every body the upstream receives.

Checks of an upstream body (`upstream_problems`): every `tool_use` id of an assistant message is
a non-empty string, distinct within its message, answered by exactly one `tool_result` block of
the next user message, and no `tool_result` answers anything else (`pair_problems`); every
assistant message holding a `thinking`/`redacted_thinking` block is equal to an assistant
message the client sent or the upstream answered (`thinking_problems`); at most four
`cache_control` markers (`count_marks`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Iterator
from typing import Any

from hostile import encode
from hostile_messages import MODEL, hostile_messages, sound_messages, tiny_messages
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from bench.hostile.cases import Case

MESSAGES = "/v1/messages"
COUNT = "/v1/messages/count_tokens"
THINKING = ("thinking", "redacted_thinking")
MAX_MARKS = 4


def _blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _typed(message: Any, kind: str) -> list[dict[str, Any]]:
    return [b for b in _blocks(message) if isinstance(b, dict) and b.get("type") == kind]


def pair_problems(messages: Any) -> list[str]:
    """Broken tool pairs of a Messages `messages` list (see the module docstring)."""
    if not isinstance(messages, list):
        return ["messages is not a list"]
    problems: list[str] = []
    pending: tuple[int, list[str]] | None = None
    for i, message in enumerate(messages):
        answered: list[str] = []
        for block in _typed(message, "tool_result"):
            call_id = block.get("tool_use_id")
            if pending is None or call_id not in pending[1]:
                problems.append(f"messages[{i}]: tool_result {call_id!r} answers no tool_use")
            elif call_id in answered:
                problems.append(f"messages[{i}]: second tool_result for {call_id!r}")
            else:
                answered.append(call_id)
        if pending is not None:
            problems += [
                f"messages[{pending[0]}]: tool_use {c!r} has no tool_result"
                for c in pending[1]
                if c not in answered
            ]
        pending = None
        uses = _typed(message, "tool_use")
        if uses and isinstance(message, dict) and message.get("role") == "assistant":
            pending = (i, _use_ids(i, uses, problems))
    if pending is not None and pending[1]:
        problems.append(f"messages[{pending[0]}]: tool_use without a next user message")
    return problems


def _use_ids(i: int, uses: list[dict[str, Any]], problems: list[str]) -> list[str]:
    ids: list[str] = []
    for use in uses:
        call_id = use.get("id")
        if not isinstance(call_id, str) or not call_id:
            problems.append(f"messages[{i}]: tool_use without an id")
        elif call_id in ids:
            problems.append(f"messages[{i}]: tool_use id {call_id!r} twice")
        else:
            ids.append(call_id)
    return ids


def count_marks(value: Any) -> int:
    """`cache_control` keys anywhere in a body (tools, system, messages, nested content)."""
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(count_marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_marks(v) for v in value)
    return 0


def thinking_messages(messages: Any) -> list[Any]:
    return (
        [
            m
            for m in messages
            if isinstance(m, dict)
            and m.get("role") == "assistant"
            and any(_typed(m, k) for k in THINKING)
        ]
        if isinstance(messages, list)
        else []
    )


def _without_use_ids(message: Any) -> Any:
    """The message with its `tool_use` ids blanked (the proxy names the synthetic calls whose
    ids were missing or repeated)."""
    blocks = [
        {**b, "id": ""} if isinstance(b, dict) and b.get("type") == "tool_use" else b
        for b in _blocks(message)
    ]
    return {**message, "content": blocks}


def thinking_key(message: Any) -> str:
    """A thinking message's identity for `thinking_problems` (tool_use ids aside)."""
    return json.dumps(_without_use_ids(message), sort_keys=True)


def thinking_problems(
    messages: Any, known: list[Any], answered_before: Container[str] = frozenset()
) -> list[str]:
    """Assistant messages with thinking blocks that equal no message the client sent or the
    upstream answered (`known`; `answered_before`: the `thinking_key`s of every answer of the
    run so far, which the working set may put back in a later request), tool_use ids aside."""
    known_ = {thinking_key(m) for m in thinking_messages(known)}
    return [
        f"assistant message with thinking changed: {json.dumps(m)[:80]}"
        for m in thinking_messages(messages)
        if (key := thinking_key(m)) not in known_ and key not in answered_before
    ]


def parsed(raw: bytes | None) -> Any:
    try:
        return json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        return None


def sound(raw: bytes | None) -> bool:
    """The client's own body: an object whose messages have sound pairs, <= 4 markers."""
    body = parsed(raw)
    if not isinstance(body, dict):
        return False
    return pair_problems(body.get("messages")) == [] and count_marks(body) <= MAX_MARKS


# -- the cases --------------------------------------------------------------------------------


def messages_case(category: str, body: dict[str, Any] | bytes, **kwargs: Any) -> Case:
    raw = body if isinstance(body, bytes) else encode(body)
    return Case(category, kwargs.pop("path", MESSAGES), raw, well_formed=sound(raw), **kwargs)


SCRIPTS = st.sampled_from(
    (
        "read",
        "read",
        "read",
        "bad_args",
        "mixed",
        "odd",
        "weird",
        "echo",
        "fault_529",
        "fault_500",
        "fault_reset",
        "fault_badjson",
        "fault_sse_error",
        "fault_too_long",
    )
)


def fuzz_cases(count: int, seed_: int, sink: Callable[[Case], None]) -> None:
    """`count` hostile Messages bodies handed to `sink` as drawn; one in eight to
    count_tokens; the upstream script drawn too. Reproducible for one seed."""
    if count <= 0:
        return
    paths = st.sampled_from([COUNT] + [MESSAGES] * 7)

    @seed(seed_)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(body=st.one_of(hostile_messages(), sound_messages()), path=paths, script=SCRIPTS)
    def draw(body: dict[str, Any], path: str, script: str) -> None:
        sink(messages_case("fuzz", body, path=path, script=script))

    draw()


def attack_cases(scale: int) -> Iterator[Case]:
    """The brief's named attacks, a few of each (heavy ones sent alone)."""
    for k in range(2):
        body = {
            "model": MODEL,
            "max_tokens": 100,
            "messages": tiny_messages(10_000),
            "stream": bool(k),
        }
        yield messages_case("10,000 tiny messages", body, heavy=True, script="read")
        yield messages_case("10,000 tiny messages", body, heavy=True, path=COUNT)
    for size in (2_000_000, 5_000_000):
        text = "".join(f"row {i} value {i * 31 % 997}\n" for i in range(size // 22))
        for content in (text, [{"type": "text", "text": text}]):
            yield messages_case(
                "huge tool result (2-5 MB)", _with_result(content), heavy=True, script="read"
            )
    for k in range(25 * scale):
        for script in ("read", "read_sse", "mixed", "bad_args", "odd", "weird", "weird_sse"):
            body = _with_result("\n".join(f"line {i}: {i * k}" for i in range(600)))
            body["stream"] = script == "read_sse" or k % 2 == 1
            yield messages_case(f"read rounds: {script}", body, script=script.split("_")[0])


def _with_result(content: Any) -> dict[str, Any]:
    use = {"type": "tool_use", "id": "toolu_big", "name": "run", "input": {"cmd": "cat log"}}
    return {
        "model": MODEL,
        "max_tokens": 512,
        "messages": [
            {"role": "user", "content": "Read the log."},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "read it", "signature": "sig=="}, use],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_big", "content": content}
                ],
            },
            {"role": "user", "content": "Summarise."},
        ],
    }
