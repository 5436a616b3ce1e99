"""`mode: compact` through the real Preparer over generated conversations (hypothesis).

For every conversation and budget: the prepared input fits the allowance (or is refused), no tool
exchange is split, at most one summary stands for the dropped turns and it stays within its
budget, everything removed is in an artifact the prepared request names, and preparation is
deterministic: again on the same store (the frozen summary) and on a fresh store (made again).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pipeline_harness import Harness, make_harness, write_policy
from shared_tokens import shared_counters
from strategies import conversations

from proxy.artifacts.store import MemoryStore
from proxy.engine.manifest import Prepared
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_chat.conversation import parse_conversation
from proxy.http.auth import Tenant

WINDOWS = (900, 2000, 6000)
SUMMARY_TOKENS = 120
POLICY = """
extends: default
mode: compact
budget: {{context_window: {window}, reserved_output: 200, safety_margin: 0,
         trigger: 0.9, target: 0.6}}
steps:
  - {{kind: offload_tool_results, threshold_chars: 2000, preview_head_chars: 200,
     preview_tail_chars: 100}}
  - {{kind: clear_tool_results, keep_recent_exchanges: 0}}
  - {{kind: drop_turns, keep_recent_turns: 1, summarizer: {{max_summary_tokens: {summary}}}}}
"""
ARTIFACT = re.compile(r"art_[0-9a-f]{32}")
EXAMPLES = settings(
    max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TENANT = "p:scope"


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = tmp_path_factory.mktemp("policies")
    for window in WINDOWS:
        write_policy(path, POLICY.format(window=window, summary=SUMMARY_TOKENS), f"c{window}")
    return path


@pytest.fixture(scope="module")
def harness(directory: Path) -> Harness:
    return make_harness(directory, shared_counters())


def prepare(loop: asyncio.AbstractEventLoop, harness: Harness, messages: list[Any],
            window: int) -> Prepared | ProxyError:
    tenant = Tenant(name="p", policy=f"c{window}", scope=TENANT, upstream_key=None,
                    passthrough=True)
    try:
        return loop.run_until_complete(
            harness.prepare({"model": "gpt-4o", "messages": messages}, tenant)
        )
    except ProxyError as error:
        return error


@EXAMPLES
@given(messages=conversations(max_turns=8, max_steps=4), window=st.sampled_from(WINDOWS))
def test_compaction_fits_keeps_pairs_and_loses_nothing(
    loop: asyncio.AbstractEventLoop, harness: Harness, directory: Path, messages: list[Any],
    window: int,
) -> None:
    result = prepare(loop, harness, messages, window)
    if isinstance(result, ProxyError):
        assert result.code is ErrorCode.context_length_exceeded
        return
    assert result.manifest.tokens_after <= result.manifest.allowance
    out = result.parsed["messages"]
    assert parse_conversation(out).problems == ()  # no tool call without its result, or back
    summaries = [m for m in out if harness.own_text(m.get("content"), TENANT).startswith(
        "[ctxproxy: ") and "were compacted" in m["content"]]
    assert len(summaries) <= 1
    event(f"summaries: {len(summaries)}")
    counter = harness.counters.for_model("gpt-4o")
    for summary in summaries:
        body = summary["content"].split("]\n", 1)[1] if "]\n" in summary["content"] else ""
        assert counter.count_text(body) <= SUMMARY_TOKENS
    _assert_nothing_lost(loop, harness.store, messages, out)
    # deterministic: the same store (the frozen summary), then a fresh store (made again)
    again = prepare(loop, harness, messages, window)
    assert isinstance(again, Prepared) and again.body == result.body
    fresh = make_harness(directory, harness.counters, MemoryStore(b"test-secret"))
    other = prepare(loop, fresh, messages, window)
    assert isinstance(other, Prepared) and other.body == result.body


def _assert_nothing_lost(loop: asyncio.AbstractEventLoop, store: MemoryStore,
                         messages: list[Any], out: list[Any]) -> None:
    recovered: list[Any] = []
    for message in out:
        content = message.get("content")
        ids = ARTIFACT.findall(content) if isinstance(content, str) and content.startswith(
            "[ctxproxy") else []
        if not ids:
            recovered.append(message)
            continue
        artifact = loop.run_until_complete(store.get(TENANT, ids[0]))
        assert artifact is not None, f"{ids[0]} is referenced but not stored"
        if artifact.kind == "dropped_turns":
            recovered += [orjson.loads(line) for line in artifact.content.split("\n")]
            for named in ids[1:]:  # every tool result the summary names is stored too
                assert loop.run_until_complete(store.get(TENANT, named)) is not None
        else:
            recovered.append({**message, "content": artifact.content})
    assert sorted(map(_key, recovered)) == sorted(map(_key, messages))


def _key(message: dict[str, Any]) -> bytes:
    if message.get("role") == "tool" and isinstance(message.get("content"), list):
        text = "".join(p.get("text", "") for p in message["content"] if isinstance(p, dict))
        message = {**message, "content": text}
    return orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
