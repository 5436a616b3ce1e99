"""The `/v1/responses` requests of `bench/hostile/run.py` and the checks of what goes upstream.

`item_pair_problems` is the Responses counterpart of `cases.pair_problems`: every call
(`function_call`, `custom_tool_call`, `computer_call`, `local_shell_call`, `shell_call`,
`apply_patch_call`) has a non-empty string `call_id`, distinct in the input, answered by exactly
one output of its own type in the run of outputs right after the model's run that made it (the
model's run: reasoning, assistant messages, calls, built-in calls); an output anywhere else is an
orphan. `Integrity` adds the reasoning check: every reasoning item upstream is one the client or
the upstream sent, field for field and in the same key order, and still directly before the item
it preceded there (a call keeps the reasoning that preceded it).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from hostile import encode
from hostile_responses import hostile_responses_bodies, hostile_responses_requests
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from bench.hostile.cases import Case, fresh_words
from bench.hostile.next_turn import next_turn

RESPONSES = "/v1/responses"
PREPARE = "/v1/context/prepare?format=openai_responses"
PAIRED = {
    "function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output", "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output", "apply_patch_call": "apply_patch_call_output",
}  # fmt: skip
OUTPUTS = {v: k for k, v in PAIRED.items()}


def _type(item: Any) -> Any:
    """The item's `type` when it is a string (`message` for a typeless item with a role)."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type", "message" if "role" in item else None)
    return kind if isinstance(kind, str) else f"not a string: {kind!r}"[:40]


def _call_id(item: Any) -> Any:
    if _type(item) == "local_shell_call_output" and "call_id" not in item:
        return item.get("id")
    return item.get("call_id")


def _is_model(item: Any) -> bool:
    kind = _type(item)
    if kind == "message":
        return item.get("role") == "assistant"
    return isinstance(kind, str) and (kind == "reasoning" or kind.endswith("_call"))


def item_pair_problems(items: Any) -> list[str]:
    """Broken call/output pairs of a Responses `input` (see the module docstring)."""
    if not isinstance(items, list):
        return ["input is not a list"]
    problems: list[str] = []
    run: dict[str, tuple[int, str]] = {}  # call id -> (index, call type), of the current run
    answered: set[str] = set()
    seen: set[str] = set()
    outputs_started = False
    for i, item in enumerate(items):
        kind = _type(item)
        if kind in OUTPUTS:
            outputs_started = True
            problems += _output_problems(i, item, run, answered)
            continue
        if not _is_model(item) or outputs_started:
            problems += [f"input[{k}]: call {c!r} has no output" for c, (k, _) in run.items()
                         if c not in answered]  # fmt: skip
            run, answered, outputs_started = {}, set(), False
        if kind in PAIRED:
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                problems.append(f"input[{i}]: {kind} has no call_id")
            elif call_id in seen:
                problems.append(f"input[{i}]: call id {call_id!r} twice")
            else:
                seen.add(call_id)
                run[call_id] = (i, kind)
    return problems + [f"input[{k}]: call {c!r} has no output" for c, (k, _) in run.items()
                       if c not in answered]  # fmt: skip


def _output_problems(
    i: int, item: dict[str, Any], run: dict[str, tuple[int, str]], answered: set[str]
) -> list[str]:
    call_id = _call_id(item)
    if not isinstance(call_id, str) or call_id not in run:
        return [f"input[{i}]: orphan {item['type']} ({call_id!r})"]
    if call_id in answered:
        return [f"input[{i}]: second output for {call_id!r}"]
    if OUTPUTS[item["type"]] != run[call_id][1]:
        return [f"input[{i}]: {item['type']} answers a {run[call_id][1]}"]
    answered.add(call_id)
    return []


def _key(item: dict[str, Any]) -> str:
    return str(item.get("id") or item.get("encrypted_content") or json.dumps(item))


def _follower(items: list[Any], i: int) -> Any:
    """What the reasoning item at `i` precedes (skipping reasoning after it): its type, and a
    call's name and arguments (its id may be made unique by the proxy when it was not)."""
    for item in items[i + 1 :]:
        if _type(item) != "reasoning":
            if not isinstance(item, dict):
                return None
            return (_type(item), json.dumps(item.get("name")), json.dumps(item.get("arguments")))
    return None


class Integrity:
    """The reasoning items of one request (the client's and those the upstream answered with)."""

    def __init__(self, original: bytes | None) -> None:
        self.known: dict[str, list[tuple[str, Any]]] = {}
        self.preceded: dict[str, str] = {}  # call id -> the exact reasoning right before it
        self.add_body(original)

    def add_body(self, raw: bytes | None) -> None:
        """The reasoning items of a client's body (a next turn adds its own)."""
        try:
            items = json.loads(raw or b"").get("input")
        except (ValueError, AttributeError, RecursionError):
            items = None
        if isinstance(items, list):
            for i, item in enumerate(items):  # where the client puts a call is its choice
                before = items[i - 1] if i else None
                if _type(item) in PAIRED and _type(before) != "reasoning":
                    self.preceded.pop(str(item.get("call_id")), None)
            self.add(items)

    def add(self, items: list[Any]) -> None:
        for i, item in enumerate(items):
            if _type(item) != "reasoning":
                continue
            follower = _follower(items, i)
            self.known.setdefault(_key(item), []).append((json.dumps(item), follower))
            after = items[i + 1] if i + 1 < len(items) else None
            if _type(after) in PAIRED and isinstance(after.get("call_id"), str):
                self.preceded[after["call_id"]] = json.dumps(item)

    def problems(self, items: list[Any]) -> list[str]:
        problems = []
        for i, item in enumerate(items):
            kind = _type(item)
            if kind == "reasoning":
                problems += self._reasoning(items, i, item)
            elif kind in PAIRED and str(item.get("call_id")) in self.preceded:
                before = json.dumps(items[i - 1]) if i else None
                if before != self.preceded[str(item["call_id"])]:
                    problems.append(f"input[{i}]: call {item['call_id']!r} lost its reasoning")
        return problems

    def _reasoning(self, items: list[Any], i: int, item: dict[str, Any]) -> list[str]:
        known = self.known.get(_key(item))
        if not known:
            return [f"input[{i}]: reasoning item neither the client's nor the upstream's"]
        if json.dumps(item) not in [raw for raw, _ in known]:
            return [f"input[{i}]: reasoning item changed"]
        followers = [f for raw, f in known if raw == json.dumps(item)]
        if None in followers or _follower(items, i) in followers:
            return []
        return [f"input[{i}]: reasoning item no longer before {followers[0]}"]


def body_problems(raw: bytes, integrity: Integrity) -> list[str] | None:
    """Pair and reasoning problems of a Responses body; None when it has no `input` list."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("input"), list | str):
        return None
    if isinstance(body["input"], str):
        return []
    return item_pair_problems(body["input"]) + integrity.problems(body["input"])


def well_formed(raw: bytes) -> bool:
    """The client's own input had sound pairs and distinct reasoning items (a string input has
    nothing to break)."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    if not isinstance(body, dict):
        return False
    items = body.get("input")
    if isinstance(items, str):
        return True
    if not isinstance(items, list) or item_pair_problems(items):
        return False
    keys = [_key(i) for i in items if _type(i) == "reasoning"]
    return len(keys) == len(set(keys))


def responses_case(category: str, body: dict[str, Any] | bytes, **kwargs: Any) -> Case:
    raw = body if isinstance(body, bytes) else encode(body)
    return Case(f"responses {category}", kwargs.pop("path", RESPONSES), raw,
                well_formed=well_formed(raw), kind="responses", **kwargs)  # fmt: skip


# -- fuzz -------------------------------------------------------------------------------------


def responses_fuzz_cases(count: int, seed_: int, sink: Callable[[Case], None]) -> None:
    """`count` hostile Responses bodies: half wire bytes, half hostile requests on top of a long
    history (reduced by the small window, so the read rounds run); one in eight a dry run."""
    if count <= 0:
        return
    examples = settings(max_examples=count - count // 2, database=None, deadline=None,
                        phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    paths = st.sampled_from([PREPARE] + [RESPONSES] * 7)
    scripts = st.sampled_from(("read", "read", "mixed", "odd", "echo"))

    @seed(seed_)
    @examples
    @given(raw=hostile_responses_bodies(), path=paths, script=scripts)
    def wire_bytes(raw: bytes, path: str, script: str) -> None:
        sink(responses_case("fuzz: wire bytes", raw, path=path, script=script))

    @seed(seed_)
    @settings(examples, max_examples=max(1, count // 2))
    @given(body=hostile_responses_requests(allow_many=False), turns=st.integers(4, 10),
           path=paths, script=scripts)  # fmt: skip
    def on_history(body: dict[str, Any], turns: int, path: str, script: str) -> None:
        if isinstance(body.get("input"), list):
            body["input"] = long_history(turns) + body["input"]
        sink(responses_case("fuzz: on a long history", body, path=path, script=script))

    wire_bytes()
    if count // 2:
        on_history()


def long_history(turns: int) -> list[Any]:
    """Turns of a reasoning model: reasoning, a shell call with a long output, an answer."""
    items: list[Any] = []
    for k in range(turns):
        tag = uuid.uuid4().hex[:8]
        items += [
            {"role": "user", "content": f"step {k}"},
            {"type": "reasoning", "id": f"rs_l{tag}", "summary": [],
             "encrypted_content": f"gAAAAB{tag}" + "z" * 200},
            {"type": "function_call", "call_id": f"call_l{tag}", "name": "shell",
             "arguments": '{"cmd": "cat"}'},
            {"type": "function_call_output", "call_id": f"call_l{tag}",
             "output": fresh_words(1200)},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": f"done {k}"}]},
        ]  # fmt: skip
    return items


# -- attack cases -----------------------------------------------------------------------------


def exchange(output: Any, *, stream: bool = False, **extra: Any) -> dict[str, Any]:
    """A conversation of its own: the working set keeps read rounds by the history's content,
    so two identical ones in one scope share them (by design), which the checker would count
    as reasoning from elsewhere."""
    tag = uuid.uuid4().hex[:8]
    return {
        "model": "gpt-5",
        "input": [
            {"role": "user", "content": "Read the page and answer."},
            {"type": "reasoning", "id": f"rs_{tag}", "summary": [],
             "encrypted_content": f"gAAAAB{tag}" + "q" * 300},
            {"type": "function_call", "call_id": "call_1", "name": "fetch", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": output},
            {"role": "user", "content": "What does it say?"},
        ],
        "stream": stream,
        "store": False,
        **extra,
    }  # fmt: skip


CLIENT_TOOLS = [
    {"type": "function", "name": "read_context_artifact", "description": "the client's own",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"type": "function", "name": "search_context_artifact", "parameters": {"type": "object"}},
    {"type": "custom", "name": "apply_patch"}, {"type": "web_search"},
]  # fmt: skip


def client_calls_stay_the_clients(status: int, answer: bytes) -> str | None:
    if status != 200:
        return None
    if b"read_context_artifact_ctxproxy" in answer:
        return "the proxy's renamed tool reached the client"
    if b'"read_context_artifact"' not in answer:
        return "the client's own call is missing"
    return None


def tiny_items(count: int) -> list[Any]:
    items: list[Any] = []
    k = 0
    while len(items) < count:
        items += [{"role": "user", "content": f"q{k}"},
                  {"type": "function_call", "call_id": f"c{k}", "name": "ls", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"c{k}", "output": f"r{k}"},
                  {"type": "message", "role": "assistant", "content": f"a{k}"}]  # fmt: skip
        k += 1
    return [*items, {"role": "user", "content": "and now?"}]


def responses_attack_cases(scale: int) -> Iterator[Case]:
    for k, megabytes in enumerate((2, 5, 8, 3)):
        body = exchange(fresh_words(megabytes * 1_000_000), stream=k % 2 == 1)
        yield responses_case("huge call output (2-8 MB)", body, heavy=True, script="read",
                             path=PREPARE if k == 3 else RESPONSES)  # fmt: skip
    for k in range(3):
        body = {"model": "gpt-5", "input": tiny_items(10_000), "stream": k == 1}
        yield responses_case("10,000 tiny items", body, heavy=True,
                             path=PREPARE if k == 2 else RESPONSES)  # fmt: skip
    for k in range(2):
        yield responses_case("search 'A'*999+'b' on 1 MB", exchange("a" * 1_000_000,
                             stream=k == 1), heavy=True, script="search")  # fmt: skip
    long_output = "x" * 20_000
    for k in range(25 * scale):
        stream = k % 2 == 1
        script = "mixed" if k % 3 else "read"
        yield responses_case("client tool named read_context_artifact",
                             exchange(long_output, stream=stream, tools=CLIENT_TOOLS),
                             script=script, check=client_calls_stay_the_clients
                             if script == "mixed" else None)  # fmt: skip
        for script in ("bad_ids", "bad_args", "odd", "read"):
            yield responses_case(f"read rounds: {script}", exchange(long_output, stream=stream),
                                 script=script)  # fmt: skip
        parts = [{"type": "input_text", "text": long_output}]
        yield responses_case("output as parts, read", exchange(parts, stream=stream),
                             script="read")  # fmt: skip
        for kind in range(4):
            script = ("read", "mixed", "odd", "search")[(k + kind) % 4]
            yield responses_case(f"two turns, client kind {kind} (hostile_next_turn)",
                                 exchange(long_output, stream=stream, tools=CLIENT_TOOLS),
                                 script=script, follow_up=next_turn(kind))  # fmt: skip
        yield responses_case("client goes away mid-answer", exchange(long_output, stream=stream),
                             script="slow", hang_up=True)  # fmt: skip
        yield responses_case("relayed stream broken by the upstream", {"model": "gpt-5",
                             "input": f"hi {k}", "stream": True}, script="r_break")  # fmt: skip
        yield responses_case("background: true", exchange(long_output, stream=stream,
                             background=True), script="read")  # fmt: skip
        yield responses_case('"stream": "true"', {**exchange(long_output), "stream": "true"})
        yield responses_case("previous_response_id with input", exchange(
            long_output, stream=stream, previous_response_id="resp_1"), script="read")
        fault = ("fault_502", "fault_503", "fault_reset", "fault_badjson", "r_failed",
                 "r_error", "r_cut", "r_eof", "r_eof_later")[k % 9]  # fmt: skip
        yield responses_case("upstream fails on purpose", exchange(long_output, stream=stream),
                             script=fault)  # fmt: skip
