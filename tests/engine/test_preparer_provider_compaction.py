"""The provider's own compaction passes intact: kept where it stands, byte for byte, while the
history around it is reduced (Anthropic's `compaction` blocks and `context_management`, the
Responses API's encrypted `compaction` item)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline_harness import SMALL_BUDGET, TENANT, client_bytes, make_harness
from shared_tokens import shared_counters

from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES
from proxy.formats.openai_responses import OPENAI_RESPONSES

DROPS = SMALL_BUDGET + "steps:\n  - {kind: drop_turns, keep_recent_turns: 2}\n"
BIG = "log line with an error somewhere\n" * 200
COMPACTED = {"type": "compaction", "content": "Summary of everything so far: the build is red."}
EDITS = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1}}]}


def messages_body() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for i in range(10):
        if i == 3:  # compacted by the provider after three steps: deep in the history
            messages += [
                {"role": "user", "content": "Go on."},
                {"role": "assistant", "content": [COMPACTED, {"type": "text", "text": "On."}]},
            ]
        messages += [
            {"role": "user", "content": f"Step {i}."},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"cmd": "make"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{i}", "content": BIG},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": f"Done {i}."}]},
        ]  # fmt: skip
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "messages": messages,
        "context_management": EDITS,
    }


def responses_body(compaction: dict[str, Any]) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "Fix it."}]
    for i in range(10):
        if i == 3:  # compacted by the provider after three steps: deep in the history
            items.append(compaction)
        items += [
            {"type": "message", "role": "user", "content": f"Step {i}."},
            {"type": "function_call", "call_id": f"c{i}", "name": "bash", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": BIG},
            {"type": "message", "role": "assistant", "content": f"Done {i}."},
        ]
    return {"model": "gpt-4o", "input": items, "store": False}


async def test_an_anthropic_compaction_block_and_context_management_pass_intact(
    tmp_path: Path,
) -> None:
    (tmp_path / "test.yaml").write_text(DROPS)
    harness = make_harness(tmp_path, shared_counters())
    body = messages_body()
    prepared = await harness.preparer.prepare(
        body, client_bytes(body), TENANT, ANTHROPIC_MESSAGES
    )
    assert prepared.changed and prepared.manifest.actions
    sent = json.loads(prepared.body)
    assert sent["context_management"] == EDITS
    compacted = next(m for m in body["messages"] if COMPACTED in list(m["content"]))
    assert compacted in sent["messages"]  # unchanged, while turns around it went
    assert len(sent["messages"]) < len(body["messages"])


async def test_a_responses_compaction_item_passes_intact(tmp_path: Path) -> None:
    (tmp_path / "test.yaml").write_text(DROPS)
    harness = make_harness(tmp_path, shared_counters())
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB" + "k" * 900}
    body = responses_body(compaction)
    prepared = await harness.preparer.prepare(body, client_bytes(body), TENANT, OPENAI_RESPONSES)
    assert prepared.changed and prepared.manifest.actions
    sent = json.loads(prepared.body)["input"]
    assert compaction in sent and len(sent) < len(body["input"])


def test_the_compaction_is_counted_as_what_it_holds() -> None:
    """An encrypted compaction counts as the tokens it encodes (~3 bytes a token of base64), an
    Anthropic one as its text: never as nothing."""
    counter = shared_counters().for_model("gpt-4o")
    encrypted = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB" + "k" * 900}
    assert 150 <= counter.count_message(encrypted) <= 250
    claude = shared_counters().for_model("claude-sonnet-4-5")
    text = {"role": "assistant", "content": [{**COMPACTED, "content": "word " * 300}]}
    assert 280 <= claude.count_message(text) <= 400
