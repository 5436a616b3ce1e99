"""Invariants of preparation over generated conversations (hypothesis).

For every generated conversation and budget: the prepared input fits the allowance or the request
is refused; no tool exchange is split; protected messages are kept byte-identical; nothing removed
is lost (it is in a referenced artifact); output is deterministic; preparing an already prepared
request changes nothing; a refusal happens only when protected content cannot fit.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from context_harness import notice_message
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pipeline_harness import Harness, make_harness, write_policy
from shared_tokens import shared_counters
from strategies import conversations

from proxy.engine.manifest import Prepared
from proxy.engine.tool_text import placeholder
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.conversation import parse_conversation
from proxy.formats.openai_chat.fields import content_text
from proxy.http.auth import Tenant
from proxy.synthetic.registry import tool_specs

WINDOWS = (600, 1500, 4000, 16000)
POLICY = """
extends: default
budget: {{context_window: {window}, reserved_output: 200, safety_margin: 0,
         trigger: 0.9, target: 0.6}}
steps:
  - {{kind: offload_tool_results, threshold_chars: 2000, preview_head_chars: 200,
     preview_tail_chars: 100}}
  - {{kind: clear_tool_results, keep_recent_exchanges: 0}}
  - {{kind: drop_turns, keep_recent_turns: 1}}
"""
ARTIFACT = re.compile(r"art_[0-9a-f]{32}")
EXAMPLES = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
DROP_ONLY = """
extends: default
budget: {context_window: 3000, reserved_output: 200, safety_margin: 0, trigger: 0.9, target: 0.6}
protect: {recent_turns: 1, recent_tool_exchanges: 0}
steps: [{kind: drop_turns}]
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Harness:
    directory: Path = tmp_path_factory.mktemp("policies")
    for window in WINDOWS:
        write_policy(directory, POLICY.format(window=window), name=f"w{window}")
    write_policy(directory, DROP_ONLY, name="drop-only")
    unprotected_task = DROP_ONLY.replace("protect: {", "protect: {first_user: false, ")
    write_policy(directory, unprotected_task, name="drop-only-any")
    return make_harness(directory, shared_counters())


def tenant(window: int | str) -> Tenant:
    policy = window if isinstance(window, str) else f"w{window}"
    return Tenant(name="p", policy=policy, scope="p:scope", upstream_key=None, passthrough=True)


def prepare(
    loop: asyncio.AbstractEventLoop, harness: Harness, messages: list[Any], window: int | str
) -> Prepared | ProxyError:
    request = {"model": "gpt-4o", "messages": messages}
    try:
        return loop.run_until_complete(harness.prepare(request, tenant(window)))
    except ProxyError as error:
        return error


def recent_turn_start(messages: list[Any]) -> int:
    conversation = parse_conversation(messages)
    return conversation.turns[-1].start if conversation.turns else conversation.system_end


def minimal_tokens(harness: Harness, messages: list[Any]) -> int:
    """An independent lower bound: what must stay (system, task, last turn), results cleared."""
    counter = harness.counters.for_model("gpt-4o")
    conversation = parse_conversation(messages)
    keep = list(range(conversation.system_end))
    first_user = next((i for i, m in enumerate(messages) if m["role"] == "user"), None)
    if first_user is not None:
        keep.append(first_user)
    keep += range(recent_turn_start(messages), len(messages))
    total = 0
    for i in sorted(set(keep)):
        message = messages[i]
        cost = counter.count_message(message)
        text = content_text(message) if message["role"] == "tool" else None
        if text is not None:
            # The placeholder the clear step writes: the id this content gets (ids are random
            # hex; one of zeros counts far fewer tokens and made this bound too low), its size,
            # the shortest wording.
            artifact_id = harness.store.artifact_id("p:scope", text)

            def mac(text: str) -> str:  # any keyed MAC: only the tag's width counts here
                return harness.store.artifact_id("own", text)

            cleared = {**message, "content": placeholder(artifact_id, len(text), None, False, mac)}
            cost = min(cost, counter.count_message(cleared))
        total += cost
    if len(set(keep)) < len(messages):  # something must go: its notice stays
        realistic_id = harness.store.artifact_id("p:scope", "any content")
        wide = notice_message("user", True, 10**9, 10**9, realistic_id)
        total += counter.count_message(wide)
    return total + counter.count_tools(OPENAI_CHAT.synthetic_tools(tool_specs(20_000)), None) + 3


@EXAMPLES
@given(messages=conversations(max_turns=8, max_steps=4), window=st.sampled_from(WINDOWS))
def test_fits_or_refused_only_when_protected_content_cannot_fit(
    loop: asyncio.AbstractEventLoop, harness: Harness, messages: list[Any], window: int
) -> None:
    result = prepare(loop, harness, messages, window)
    event(f"outcome: {'refused' if isinstance(result, ProxyError) else result.manifest.outcome}")
    if isinstance(result, ProxyError):
        assert result.code is ErrorCode.context_length_exceeded
        allowance = (result.details or {})["allowance_tokens"]
        assert minimal_tokens(harness, messages) > allowance
        return
    manifest = result.manifest
    assert manifest.tokens_after <= manifest.allowance
    counter = harness.counters.for_model("gpt-4o")
    assert counter.count_request(result.parsed) == manifest.tokens_after
    if manifest.tokens_before <= manifest.trigger:  # only oversized results, offloaded when seen
        assert {action.step for action in manifest.actions} <= {"offload_tool_results"}
        assert result.changed == bool(manifest.actions)


@EXAMPLES
@given(messages=conversations(max_turns=8, max_steps=4), window=st.sampled_from(WINDOWS))
def test_structure_protection_and_nothing_lost(
    loop: asyncio.AbstractEventLoop, harness: Harness, messages: list[Any], window: int
) -> None:
    original = orjson.loads(orjson.dumps(messages))
    result = prepare(loop, harness, messages, window)
    assert messages == original  # the input is never mutated
    if isinstance(result, ProxyError):
        return
    out = result.parsed["messages"]
    assert parse_conversation(out).problems == ()
    system_end = parse_conversation(messages).system_end
    assert out[:system_end] == messages[:system_end]
    first_user = next((m for m in messages if m["role"] == "user"), None)
    if first_user is not None:
        assert first_user in out
    tail = messages[recent_turn_start(messages) :]
    assert [m.get("role") for m in out[len(out) - len(tail) :]] == [m["role"] for m in tail]
    for got, want in zip(out[len(out) - len(tail) :], tail, strict=True):
        assert got == want or (
            want["role"] == "tool" and {**got, "content": want["content"]} == want
        )
    assert_nothing_lost(loop, harness, messages, out)


@EXAMPLES
@given(
    messages=conversations(max_turns=8, max_steps=4, instructions=True),
    window=st.sampled_from(WINDOWS),
)
def test_mid_conversation_instructions_are_kept_where_they_stand(
    loop: asyncio.AbstractEventLoop, harness: Harness, messages: list[Any], window: int
) -> None:
    result = prepare(loop, harness, messages, window)
    if isinstance(result, ProxyError):
        assert result.code is ErrorCode.context_length_exceeded
        return
    out = result.parsed["messages"]
    system_end = parse_conversation(messages).system_end
    wanted = [m for m in messages[system_end:] if m["role"] in ("system", "developer")]
    kept = [m for m in out[system_end:] if m["role"] in ("system", "developer")]
    event(f"reduced around instructions: {bool(wanted) and result.changed}")
    assert kept == wanted  # none dropped or rewritten, none added
    assert _in_order(messages, [m for m in out if m in messages])  # none moved
    assert_nothing_lost(loop, harness, messages, out)


def _in_order(messages: list[Any], kept: list[Any]) -> bool:
    """Whether `kept` is a subsequence of `messages` (the same items, in the same order)."""
    rest = iter(messages)
    return all(any(m == k for m in rest) for k in kept)


def assert_nothing_lost(
    loop: asyncio.AbstractEventLoop, harness: Harness, messages: list[Any], out: list[Any]
) -> None:
    recovered: list[Any] = []
    for message in out:
        content = message.get("content")
        ids = (
            ARTIFACT.findall(content)
            if isinstance(content, str) and content.startswith("[ctxproxy")
            else []
        )
        if not ids:
            recovered.append(message)
            continue
        artifact = loop.run_until_complete(harness.store.get("p:scope", ids[0]))
        assert artifact is not None, f"{ids[0]} is referenced but not stored"
        if artifact.kind == "dropped_turns":
            recovered += [orjson.loads(line) for line in artifact.content.split("\n")]
        else:
            recovered.append({**message, "content": artifact.content})
    # Dropped turns come back from one archive (the task message may sit inside the dropped
    # span), so compare as multisets of exact messages.
    assert _sorted(recovered) == _sorted(messages)


def _sorted(messages: list[Any]) -> list[bytes]:
    return sorted(orjson.dumps(_normal(m), option=orjson.OPT_SORT_KEYS) for m in messages)


def _normal(message: dict[str, Any]) -> dict[str, Any]:
    """Offloading stores a text-parts tool result as its joined text: compare them as text."""
    return {**message, "content": _text(message)} if message.get("role") == "tool" else message


def _text(message: dict[str, Any]) -> Any:
    content = message.get("content")
    if (
        isinstance(content, list)
        and all(isinstance(p, dict) and p.get("type") == "text" for p in content)
        and content
    ):
        return "".join(p["text"] for p in content)
    return content


@EXAMPLES
@given(messages=conversations(max_turns=8, max_steps=4), window=st.sampled_from(WINDOWS))
def test_deterministic_and_idempotent(
    loop: asyncio.AbstractEventLoop, harness: Harness, messages: list[Any], window: int
) -> None:
    first = prepare(loop, harness, messages, window)
    second = prepare(loop, harness, messages, window)
    if isinstance(first, ProxyError):
        assert isinstance(second, ProxyError) and second.details == first.details
        return
    assert isinstance(second, Prepared) and first.body == second.body
    again = prepare(loop, harness, first.parsed["messages"], window)
    assert isinstance(again, Prepared)
    assert again.parsed["messages"] == first.parsed["messages"]


# -- the same invariants on hand-written examples (drop_turns over parallel tool exchanges) -----


def parallel_exchanges(
    turns: int, fan_out: tuple[int, ...], *, heavy_results: bool = False
) -> list[dict[str, Any]]:
    """Turns of: user, then one assistant message per entry of `fan_out` calling that many tools
    at once, each followed by all its results, then the assistant's answer. The tokens sit in the
    answers (a result a broken drop leaves behind still fits, so the output shows it instead of
    a refusal) or, with `heavy_results`, spread over the results (cuts inside a turn then free
    as much as cuts at its start)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Task: check every file."},
    ]
    result = "x = 1\n" * 30 if heavy_results else "ok"
    answer = "" if heavy_results else " ".join(f"file {k} is fine;" for k in range(40))
    for t in range(turns):
        if t:
            messages.append({"role": "user", "content": f"Go on with batch {t}."})
        for e, calls in enumerate(fan_out):
            ids = [f"call_{t}_{e}_{c}" for c in range(calls)]
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {
                                "name": "read_file",
                                "arguments": f'{{"path": "src/{i}.py"}}',
                            },
                        }
                        for i in ids
                    ],
                }
            )
            messages += [
                {"role": "tool", "tool_call_id": i, "content": f"{i}: {result}"} for i in ids
            ]
        messages.append({"role": "assistant", "content": f"Batch {t} checked. {answer}"})
    return messages


def assert_exchanges_whole(out: list[dict[str, Any]]) -> None:
    """Every call is directly followed by all of its results, and every result by nothing else."""
    i = 0
    while i < len(out):
        message = out[i]
        assert message["role"] != "tool", f"result at {i} without its call: {message}"
        calls = message.get("tool_calls") or []
        results = out[i + 1 : i + 1 + len(calls)]
        assert sorted(r.get("tool_call_id") for r in results if r["role"] == "tool") == sorted(
            c["id"] for c in calls
        ), f"exchange at {i} is split"
        i += 1 + len(calls)


def dropped_span(
    loop: asyncio.AbstractEventLoop, harness: Harness, messages: list[Any], out: list[Any]
) -> tuple[int, int]:
    """(start, end) of the original messages archived behind the one notice in `out`."""
    [notice] = [m for m in out if harness.own_text(m.get("content"), "p:scope")]
    [artifact_id] = ARTIFACT.findall(notice["content"])
    archive = loop.run_until_complete(harness.store.get("p:scope", artifact_id))
    assert archive is not None and archive.kind == "dropped_turns"
    dropped = [orjson.loads(line) for line in archive.content.split("\n")]
    start = messages.index(dropped[0])
    assert messages[start : start + len(dropped)] == dropped, "the archive is not one span"
    position = out.index(notice)
    assert out[:position] == messages[:start]
    assert out[position + 1 :] == messages[start + len(dropped) :]
    return start, start + len(dropped)


@pytest.mark.parametrize("fan_out", [(3,), (2, 3), (1, 4, 2)], ids=str)
def test_drop_turns_keeps_parallel_exchanges_whole(
    loop: asyncio.AbstractEventLoop, harness: Harness, fan_out: tuple[int, ...]
) -> None:
    messages = parallel_exchanges(12, fan_out)
    result = prepare(loop, harness, messages, "drop-only")
    assert isinstance(result, Prepared) and result.changed
    assert [a.step for a in result.manifest.actions] == ["drop_turns"]
    out = result.parsed["messages"]
    assert_exchanges_whole(out)
    assert parse_conversation(out).problems == ()
    assert result.manifest.tokens_after <= result.manifest.allowance


@pytest.mark.parametrize("fan_out", [(3,), (2, 3)], ids=str)
@pytest.mark.parametrize(("policy", "first_dropped"), [("drop-only", 2), ("drop-only-any", 1)])
def test_dropped_span_is_whole_turns(
    loop: asyncio.AbstractEventLoop,
    harness: Harness,
    fan_out: tuple[int, ...],
    policy: str,
    first_dropped: int,
) -> None:
    messages = parallel_exchanges(12, fan_out, heavy_results=True)
    result = prepare(loop, harness, messages, policy)
    assert isinstance(result, Prepared)
    start, end = dropped_span(loop, harness, messages, result.parsed["messages"])
    turn_starts = [turn.start for turn in parse_conversation(messages).turns]
    # From the first turn (after the task when the task is protected) ...
    assert (start, turn_starts[0]) == (first_dropped, 1)
    # ... up to the start of a later turn, never into the middle of one.
    assert end in turn_starts, f"the span ends inside a turn, at message {end}"
    assert turn_starts.index(end) >= 2  # at least two whole turns went
