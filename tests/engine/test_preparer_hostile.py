"""Hostile bodies straight into `loads_object` + `Preparer.prepare` (no server, fast).

Only a `ProxyError` with a 4xx code may escape, and its envelope must serialise; otherwise the
result is a `Prepared` that is a correct forward: the client's own bytes when unchanged, or valid
JSON that keeps every top-level field, parses into a structurally sound conversation and fits.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hostile import encode, hostile_bodies, hostile_requests
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pipeline_harness import Harness, agent_history, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.engine.manifest import Prepared
from proxy.errors import ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.conversation import parse_conversation
from proxy.http.auth import Tenant
from proxy.jsonio import dumps, loads, loads_object

POLICIES = {
    "hostile-default": "extends: default\n",
    # growth_turns 0: the first tool result is offloaded in place, not dropped (read at index 3)
    "hostile-tiny": """
budget: {context_window: 2500, reserved_output: 200, safety_margin: 0, growth_turns: 0}
steps:
  - {kind: offload_tool_results, threshold_chars: 300, preview_head_chars: 60,
     preview_tail_chars: 20}
  - {kind: clear_tool_results, keep_recent_exchanges: 0}
  - {kind: drop_turns, keep_recent_turns: 1}
""",
    "hostile-reject": """
on_invalid: reject
budget: {context_window: 2500, reserved_output: 200, safety_margin: 0}
steps:
  - {kind: clear_tool_results, keep_recent_exchanges: 0}
  - {kind: drop_turns, notice_role: system, keep_recent_turns: 1}
""",
}
EXAMPLES = settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TIMEOUT_S = 20


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Harness:
    directory: Path = tmp_path_factory.mktemp("policies")
    for name, text in POLICIES.items():
        write_policy(directory, text, name=name)
    return make_harness(directory, shared_counters())


def tenant(policy: str) -> Tenant:
    return Tenant(name="h", policy=policy, scope="h:scope", upstream_key=None, passthrough=True)


async def prepare_raw(harness: Harness, policy: str, raw: bytes) -> Prepared | ProxyError:
    """What the chat handler does with a body, minus the upstream call."""
    try:
        body = loads_object(raw)
        return await harness.preparer.prepare(body, raw, tenant(policy), OPENAI_CHAT)
    except ProxyError as exc:
        return exc


def check_error(error: ProxyError) -> None:
    assert 400 <= error.code.status < 500, (error.code, error.message)
    envelope = json.loads(dumps(error.envelope("rid")))  # must serialise, surrogates and all
    assert set(envelope["error"]) >= {"message", "type", "param", "code"}
    assert envelope["error"]["code"] == error.code.name and envelope["error"]["message"]


def check_forward(raw: bytes, prepared: Prepared) -> None:
    if not prepared.changed:
        assert prepared.body == raw  # the client's bytes, untouched
        return
    sent = json.loads(prepared.body)  # valid JSON, even from surrogates or huge integers
    assert sent == prepared.parsed
    original: dict[str, Any] = loads(raw)
    for key, value in original.items():
        if key not in ("messages", "tools"):
            assert sent[key] == value, key
    assert parse_conversation(sent["messages"]).problems == ()
    manifest = prepared.manifest
    assert manifest.tokens_after <= manifest.allowance
    # under the trigger, only oversized tool results are offloaded (when seen)
    steps = {action.step for action in manifest.actions}
    assert manifest.tokens_before > manifest.trigger or steps == {"offload_tool_results"}


def check(loop: asyncio.AbstractEventLoop, harness: Harness, policy: str, raw: bytes) -> None:
    result = loop.run_until_complete(asyncio.wait_for(prepare_raw(harness, policy, raw), TIMEOUT_S))
    if isinstance(result, ProxyError):
        event(f"{policy}: {result.code.name}")
        check_error(result)
    else:
        event(f"{policy}: {result.manifest.outcome}")
        check_forward(raw, result)


@EXAMPLES
@given(raw=hostile_bodies(), policy=st.sampled_from(sorted(POLICIES)))
def test_hostile_bodies_give_a_4xx_or_a_correct_forward(
    loop: asyncio.AbstractEventLoop, harness: Harness, raw: bytes, policy: str
) -> None:
    check(loop, harness, policy, raw)


@settings(EXAMPLES, max_examples=examples(150))
@given(body=hostile_requests(allow_many=False), turns=st.integers(8, 20))
def test_hostile_requests_that_must_be_reduced(
    loop: asyncio.AbstractEventLoop, harness: Harness, body: dict[str, Any], turns: int
) -> None:
    """The same mutations on top of a long history, so that the reducing code paths run."""
    messages = body.get("messages")
    if isinstance(messages, list):
        body["messages"] = agent_history(turns, result_chars=1200) + messages
    check(loop, harness, "hostile-tiny", encode(body))


@pytest.mark.parametrize(
    "text", ["\ud800", "a\udfffb", "\udc00\ud800 tail", "nul \x00 inside", "\x00" * 400]
)
def test_a_reduced_tool_result_with_lone_surrogates_or_nul(
    loop: asyncio.AbstractEventLoop, harness: Harness, text: str
) -> None:
    messages = agent_history(12, result_chars=1200)
    messages[3]["content"] = text * (2000 // len(text))  # the first tool result: offloaded
    raw = encode({"model": "gpt-4o", "messages": messages})
    result = loop.run_until_complete(prepare_raw(harness, "hostile-tiny", raw))
    assert isinstance(result, Prepared) and result.changed
    check_forward(raw, result)
    assert json.loads(result.body)["messages"][3]["content"].startswith("[ctxproxy")
    ids = [i for action in result.manifest.actions for i in action.artifact_ids]
    stored = [loop.run_until_complete(harness.store.get("h:scope", i)) for i in ids]
    assert messages[3]["content"] in [a.content for a in stored if a is not None]
