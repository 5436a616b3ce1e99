"""condense_tool_results in a preparation: the three client formats, the stored original, and a
condensed result that stays as it was when offloading acts on a later one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pipeline_harness import TENANT, client_bytes, make_harness
from shared_tokens import shared_counters

from proxy.engine.condense_text import Condensed, expand, minify
from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES
from proxy.formats.base import ClientFormat
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_responses import OPENAI_RESPONSES

ROWS = [{"id": i, "name": f"user{i}", "email": f"u{i}@example.com"} for i in range(80)]
TABLE = json.dumps(ROWS, indent=2)
PROSE = "".join(f"Paragraph {n} says something different about the design. " for n in range(300))
ARTIFACT = re.compile(r"artifact (art_[0-9a-f]{32})")


def chat(results: list[str]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the users."}]
    for n, text in enumerate(results):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "q", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": text},
            {"role": "user", "content": f"Next {n}."},
        ]
    return {"model": "gpt-4o", "messages": messages}


def anthropic(results: list[str]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the users."}]
    for n, text in enumerate(results):
        use = {"type": "tool_use", "id": f"t{n}", "name": "q", "input": {}}
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": text}
        messages += [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result, {"type": "text", "text": f"Next {n}."}]},
        ]
    return {"model": "claude-sonnet-4-5", "max_tokens": 500, "messages": messages}


def responses(results: list[str]) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "List the users."}]
    for n, text in enumerate(results):
        items += [
            {"type": "function_call", "call_id": f"f{n}", "name": "q", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"f{n}", "output": text},
            {"role": "user", "content": f"Next {n}."},
        ]
    return {"model": "gpt-4o", "input": items}


FORMATS = [(OPENAI_CHAT, chat), (ANTHROPIC_MESSAGES, anthropic), (OPENAI_RESPONSES, responses)]


def results_sent(wire: ClientFormat, parsed: dict[str, Any]) -> list[str]:
    items = wire.items(parsed)
    return [t for i in items if wire.is_tool_result(i) and (t := wire.result_text(i)) is not None]


@pytest.mark.parametrize(("wire", "build"), FORMATS, ids=lambda v: getattr(v, "name", ""))
async def test_each_format_sends_the_table_and_stores_the_original(
    tmp_path: Path, wire: ClientFormat, build: Any
) -> None:
    (tmp_path / "test.yaml").write_text("extends: default\n")
    harness = make_harness(tmp_path, shared_counters())
    body = build([TABLE])
    prepared = await harness.preparer.prepare(body, client_bytes(body), TENANT, wire)
    assert prepared.changed
    assert prepared.manifest.action_summary().startswith("condense_tool_results")
    [sent] = results_sent(wire, prepared.parsed)
    assert harness.own_text(sent).startswith("[ctxproxy: tool result condensed losslessly (table)")
    assert expand(Condensed("table", sent.split("]\n", 1)[1])) == minify(ROWS)
    found = ARTIFACT.search(sent)
    assert found is not None
    stored = await harness.store.get(TENANT.scope, found[1])
    assert stored is not None and stored.content == TABLE


async def test_offloading_a_later_result_leaves_the_condensed_one_as_it_was(
    tmp_path: Path,
) -> None:
    (tmp_path / "test.yaml").write_text("extends: default\n")
    harness = make_harness(tmp_path, shared_counters())
    first = await harness.prepare(chat([TABLE]))
    later = await harness.prepare(chat([TABLE, PROSE]))
    assert len(PROSE) > 8000  # over the default offload threshold, nothing to condense
    condensed, offloaded = results_sent(OPENAI_CHAT, later.parsed)
    assert [condensed] == results_sent(OPENAI_CHAT, first.parsed)  # the same bytes
    assert "condensed losslessly" in condensed and "offloaded as artifact" in offloaded
    assert later.manifest.action_summary().startswith("condense_tool_results")
