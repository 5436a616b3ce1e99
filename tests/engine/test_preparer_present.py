"""The lines the proxy writes state the present, through the real Preparer (hypothesis).

A session grows turn by turn (one request per turn, one store, as a client sends it); its turns
state facts, in messages and inside tool results, and correct some of them later. In every
prepared request, every line of the proxy's own items (summaries, the item after a summary,
placeholders, notices) that names a value the session has superseded by then names the current
value on the same line (`restate: at_once`), or (`at_cuts`) the current value stands later in
the prompt.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pipeline_harness import Harness, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.http.auth import Tenant

POLICY = """
extends: default
mode: compact
budget: {{context_window: {window}, reserved_output: 200, safety_margin: 0}}
steps:
  - {{kind: clear_tool_results, keep_recent_exchanges: 1}}
  - {{kind: drop_turns, keep_recent_turns: 1, roll_up_turns: 2, roll_up_after: 0.2,
     restate: {restate}, summarizer: {{max_summary_tokens: 200}}}}
"""
WINDOWS = (1200, 2500)
RESTATE = ("at_once", "at_cuts")
TENANT = Tenant(name="p", policy="", scope="p:present", upstream_key=None, passthrough=True)
SUBJECTS = ("ALPHA", "BRAVO", "CHARLIE", "DELTA")
FILLER = "The team reviewed the plan and the notes in detail before the meeting went on. " * 6
Event = tuple[int, int, bool, bool]
"""(subject, new value, stated inside a tool result, restated as a correction)."""


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Harness:
    path: Path = tmp_path_factory.mktemp("policies")
    for window in WINDOWS:
        for restate in RESTATE:
            write_policy(path, POLICY.format(window=window, restate=restate),
                         f"w{window}-{restate}")
    return make_harness(path, shared_counters())


def value(subject: int, number: int) -> str:
    return f"{SUBJECTS[subject][:2]}-{number}"  # a value of one subject only


def turn(k: int, said: Event | None, current: dict[int, str]) -> list[dict[str, Any]]:
    """One turn: a user message, a tool exchange, an answer; `said` states or corrects a fact."""
    text, record = FILLER, {"id": f"R{k}", "notes": FILLER}
    if said is not None:
        subject, number, in_tool, correction = said
        new, old = value(subject, number), current.get(subject)
        statement = (
            f"Correction on {SUBJECTS[subject]}: its budget changed. Please use {new} from now "
            f"on; the earlier figure {old} is out of date."
            if correction and old is not None and old != new
            else f"For the record, the budget of {SUBJECTS[subject]} is {new}."
        )
        current[subject] = new
        if in_tool:
            record["notes"] += " " + statement
        else:
            text += " " + statement
    call = f"call_{k}"
    return [
        {"role": "user", "content": text},
        {"role": "assistant", "content": None, "tool_calls": [{"id": call, "type": "function",
         "function": {"name": "lookup", "arguments": json.dumps({"id": f"R{k}"})}}]},
        {"role": "tool", "tool_call_id": call, "content": json.dumps(record, indent=2)},
        {"role": "assistant", "content": "Noted. " + FILLER[:120]},
    ]


def stale(line: str, history: dict[int, list[str]], current: dict[int, str]) -> list[int]:
    """The subjects whose superseded value `line` names without their current value."""
    return [
        s for s, olds in history.items()
        if current[s] not in line and any(
            re.search(rf"(?<![\w.-]){re.escape(old)}(?![\w-])", line)
            for old in olds if old != current[s])
    ]


EVENTS = st.lists(
    st.one_of(st.none(), st.tuples(st.integers(0, len(SUBJECTS) - 1), st.integers(100, 999),
                                   st.booleans(), st.booleans())),
    min_size=6, max_size=14,
)


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(events=EVENTS, window=st.sampled_from(WINDOWS), restate=st.sampled_from(RESTATE))
def test_no_line_the_proxy_writes_shows_a_superseded_value_without_the_current_one(
    loop: asyncio.AbstractEventLoop, harness: Harness, events: list[Event | None], window: int,
    restate: str,
) -> None:
    policy = f"w{window}-{restate}"
    tenant = Tenant(TENANT.name, policy, f"{TENANT.scope}:{id(events)}", None, True)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You help."},
                                      {"role": "user", "content": "Task: track the budgets."}]
    current: dict[int, str] = {}
    history: dict[int, list[str]] = {}
    written = 0
    for k, said in enumerate(events):
        before = dict(current)
        messages += turn(k, said, current)
        for s, v in before.items():
            if current[s] != v:
                history.setdefault(s, []).append(v)
        body = {"model": "gpt-4o", "messages": [*messages, {"role": "user", "content": "Next?"}]}
        prepared = loop.run_until_complete(harness.prepare(body, tenant))
        out = prepared.parsed["messages"]
        for i, message in enumerate(out):
            own = harness.own_text(message.get("content"), tenant.scope)
            written += bool(own)
            for line in own.splitlines():
                subjects = stale(line, history, current)
                if restate == "at_once":
                    assert not subjects, line
                later = json.dumps(out[i + 1 :])  # at_cuts: the correction stands later
                assert all(current[s] in later for s in subjects), line
    event(f"proxy items: {'some' if written else 'none'}")
