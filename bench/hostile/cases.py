"""The requests of `bench/hostile/run.py`: fuzzed bodies and the attack cases of issue 11, and the
tool-pair checker applied to what the upstream receives.

A `Case` is one HTTP request plus what the scripted upstream does with it (`upstream`).
`well_formed` says whether the client's own messages already had sound tool pairs: only then can
a broken pair upstream be the proxy's doing (a body broken on arrival may be forwarded untouched
under `on_invalid: forward`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hostile import encode, hostile_bodies, hostile_requests
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from pipeline_harness import agent_history

CHAT = "/v1/chat/completions"
PREPARE = "/v1/context/prepare"
MODEL = "gpt-4o"
Check = Callable[[int, bytes], "str | None"]


@dataclass
class Case:
    category: str
    path: str
    body: bytes | None = None
    method: str = "POST"
    script: str = "echo"
    well_formed: bool = False
    heavy: bool = False
    credentials: dict[str, str] | None = None
    """The credential headers to send; None: the phase's rotation."""
    check: Check | None = None
    """A finding about the client's answer (status, body), or None."""
    follow_up: Callable[[bytes, bytes, bool], bytes | None] | None = None
    """The client's next turn from (this body, its answer, streamed), sent next (None: none)."""
    hang_up: bool = False
    """The client goes away after the first bytes of the answer (nothing to judge)."""
    kind: str = "chat"
    """The format of the body: `chat` or `responses` (which checker reads what goes upstream)."""


# -- the tool-pair checker --------------------------------------------------------------------


def pair_problems(messages: Any) -> list[str]:
    """Broken tool pairs: every assistant `tool_calls` id must be answered by exactly one `tool`
    message in the run of tool messages right after it; a tool message anywhere else, or for an
    id its assistant message did not call, is an orphan; call ids must be non-empty strings,
    distinct within their message."""
    if not isinstance(messages, list):
        return ["messages is not a list"]
    problems: list[str] = []
    exchange: tuple[int, list[str], set[str]] | None = None  # (index, ids, answered)
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            problems += _result_problems(i, message, exchange)
            continue
        problems += _unanswered(exchange)
        exchange = None
        if role == "assistant" and message.get("tool_calls") not in (None, []):
            ids, found = _call_ids(i, message["tool_calls"])
            problems += found
            exchange = (i, ids, set())
    return problems + _unanswered(exchange)


def _call_ids(i: int, calls: Any) -> tuple[list[str], list[str]]:
    if not isinstance(calls, list):
        return [], [f"messages[{i}]: tool_calls is not a list"]
    ids: list[str] = []
    problems: list[str] = []
    for k, call in enumerate(calls):
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str) or not call_id:
            problems.append(f"messages[{i}]: tool_calls[{k}] has no id")
        elif call_id in ids:
            problems.append(f"messages[{i}]: call id {call_id!r} twice")
        else:
            ids.append(call_id)
    return ids, problems


def _result_problems(
    i: int, message: dict[str, Any], exchange: tuple[int, list[str], set[str]] | None
) -> list[str]:
    call_id = message.get("tool_call_id")
    if exchange is None:
        return [f"messages[{i}]: orphan tool message ({call_id!r})"]
    start, ids, answered = exchange
    if call_id not in ids:
        return [f"messages[{i}]: result {call_id!r} answers no call of messages[{start}]"]
    if call_id in answered:
        return [f"messages[{i}]: second result for {call_id!r}"]
    answered.add(call_id)
    return []


def _unanswered(exchange: tuple[int, list[str], set[str]] | None) -> list[str]:
    if exchange is None:
        return []
    start, ids, answered = exchange
    return [f"messages[{start}]: call {c!r} has no result" for c in ids if c not in answered]


def body_problems(raw: bytes) -> list[str] | None:
    """Pair problems of a chat body; None when it is no JSON object with a `messages` list."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return None
    return pair_problems(body["messages"])


def chat_case(category: str, body: dict[str, Any] | bytes, **kwargs: Any) -> Case:
    raw = body if isinstance(body, bytes) else encode(body)
    return Case(category, kwargs.pop("path", CHAT), raw, well_formed=body_problems(raw) == [],
                **kwargs)  # fmt: skip


# -- fuzz -------------------------------------------------------------------------------------


def fuzz_cases(count: int, seed_: int, sink: Callable[[Case], None]) -> None:
    """`count` hostile bodies (tests/support/hostile.py) handed to `sink` as they are drawn:
    half raw wire bytes, half hostile requests on top of a long history (so the small windows
    reduce them and the read rounds run); one in eight a dry run. Reproducible for one seed."""

    if count <= 0:
        return

    def examples(n: int) -> settings:
        return settings(
            max_examples=n, database=None, deadline=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip

    paths = st.sampled_from([PREPARE] + [CHAT] * 7)

    @seed(seed_)
    @examples(count - count // 2)
    @given(raw=hostile_bodies(), path=paths)
    def wire_bytes(raw: bytes, path: str) -> None:
        sink(chat_case("fuzz: wire bytes", raw, path=path, script="read"))

    @seed(seed_)
    @examples(count // 2)
    @given(body=hostile_requests(allow_many=False), turns=st.integers(6, 14), path=paths)
    def on_history(body: dict[str, Any], turns: int, path: str) -> None:
        if isinstance(body.get("messages"), list):
            body["messages"] = agent_history(turns, result_chars=1200) + body["messages"]
        sink(chat_case("fuzz: on a long history", body, path=path, script="read"))

    wire_bytes()
    if count // 2:
        on_history()


# -- the attack cases of issue 11 -------------------------------------------------------------


def exchange(content: str, *, stream: bool = False, **extra: Any) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}
    return {
        "model": MODEL,
        "messages": [
            {"role": "user", "content": "Read the page and answer."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": content},
            {"role": "user", "content": "What does it say?"},
        ],
        "stream": stream,
        **extra,
    }


def fresh_words(chars: int) -> str:
    tag = uuid.uuid4().hex[:6]
    return " ".join(f"{tag}{i % 9973}" for i in range(chars // 12 + 1))[:chars]


def tiny_messages(count: int) -> list[dict[str, Any]]:
    """`count` short messages: user/assistant turns with a tool exchange every fifth turn."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    k = 0
    while len(messages) < count:
        messages.append({"role": "user", "content": f"q{k}"})
        if k % 5 == 0:
            call = {"id": f"c{k}", "type": "function",
                    "function": {"name": "ls", "arguments": "{}"}}  # fmt: skip
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"r{k}"})
        messages.append({"role": "assistant", "content": f"a{k}"})
        k += 1
    return [*messages, {"role": "user", "content": "and now?"}]


CLIENT_TOOLS = [
    {"type": "function", "function": {"name": "read_context_artifact",
     "description": "the client's own tool", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "search_context_artifact",
     "parameters": {"type": "object"}}},
]  # fmt: skip


def client_calls_stay_the_clients(status: int, answer: bytes) -> str | None:
    """The client sees its own `read_context_artifact` call, never the proxy's renamed tool."""
    if status != 200:
        return None
    if b"read_context_artifact_ctxproxy" in answer:
        return "the proxy's renamed tool reached the client"
    if b'"read_context_artifact"' not in answer:
        return "the client's own call is missing"
    return None


def no_empty_stop(status: int, answer: bytes) -> str | None:
    """n=2: no choice ends `stop` with `content: null` (a read call swallowed)."""
    if status != 200 or answer.startswith(b"data:"):
        return None
    for choice in json.loads(answer).get("choices") or ():
        message = choice.get("message") or {}
        if choice.get("finish_reason") == "stop" and message.get("content") is None:
            return f"choice {choice.get('index')}: content null with finish_reason stop"
    return None


def attack_cases(scale: int) -> Iterator[Case]:
    """The issue's cases, each `scale` times as many as the base count (heavy ones stay few)."""
    for k, megabytes in enumerate((2, 4, 6, 8) * 2):
        path = PREPARE if k % 4 == 3 else CHAT
        body = exchange(fresh_words(megabytes * 1_000_000), stream=k % 2 == 1)
        yield chat_case("huge tool result (2-8 MB)", body, path=path, heavy=True, script="read")
    for k in range(3):
        body = {"model": MODEL, "messages": tiny_messages(100_000), "stream": k == 1}
        yield chat_case("100,000 tiny messages", body, path=PREPARE if k == 2 else CHAT,
                        heavy=True)  # fmt: skip
    for k in range(4):
        yield chat_case("search 'A'*999+'b' on 1 MB", exchange("a" * 1_000_000, stream=k % 2 == 1),
                        heavy=True, script="search")  # fmt: skip
    long_result = "x" * 20_000
    for k in range(25 * scale):
        stream = k % 2 == 1
        body = exchange(long_result, stream=stream, tools=CLIENT_TOOLS)
        script = "mixed" if k % 3 else "read"
        check = client_calls_stay_the_clients if script == "mixed" else None
        yield chat_case("client tool named read_context_artifact", body, script=script,
                        check=check)  # fmt: skip
        yield chat_case("synthetic calls: missing/null/empty/duplicate ids",
                        exchange(long_result, stream=stream), script="bad_ids")  # fmt: skip
        yield chat_case("synthetic calls with hostile arguments",
                        exchange(long_result, stream=stream), script="bad_args")  # fmt: skip
        yield chat_case("synthetic calls in odd answers", exchange(long_result, stream=stream),
                        script="odd")  # fmt: skip
        yield chat_case("n=2 with a read call", exchange(long_result, stream=stream, n=2),
                        script="n2", check=no_empty_stop)  # fmt: skip
        body = {**exchange(long_result), "stream": 1}
        yield chat_case('"stream": 1 with the read tools', body, script="read")
        fault = ("fault_502", "fault_503", "fault_reset", "fault_badjson")[k % 4]
        yield chat_case("upstream fails on purpose", exchange(long_result, stream=stream),
                        script=fault)  # fmt: skip
        yield Case("GET /v1/models", "/v1/models", method="GET")
