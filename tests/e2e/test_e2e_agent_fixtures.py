"""Requests the real Claude Code and Codex CLIs sent (captured by `python -m bench.agents run
--capture-fixtures`, scrubbed; `tests/fixtures/agents/README.md`), through the real server's dry
run under the default policy: each is prepared (never `invalid_forwarded`), a large tool result is
offloaded, every field and every instruction the agent sent is kept, a body nothing changes goes
upstream as its own bytes, and the count is within 3% of a reference count."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from proxy_harness import RunningProxy, make_settings, start_proxy
from shared_tokens import shared_counters

from proxy.engine.condense_text import Condensed, expand, minify
from proxy.formats import FORMATS
from proxy.formats.base import ClientFormat
from proxy.jsonio import dumps
from proxy.tokens.counters import TokenCounter

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures" / "agents").glob("*.json"))
LARGE_RESULT_CHARS = 8_000
"""The default policy's `offload_tool_results.threshold_chars`."""


def fixture(path: Path) -> tuple[ClientFormat, dict[str, Any]]:
    data = json.loads(path.read_text())
    name = "anthropic_messages" if data["meta"]["cli"] == "claude" else "openai_responses"
    return FORMATS[name], data["body"]


def ids(path: Path) -> str:
    return path.stem


@pytest.fixture(scope="module")
def proxy() -> Iterator[tuple[asyncio.AbstractEventLoop, RunningProxy]]:
    """One proxy on the repo's policies (the default tenant: the default policy), no upstream
    call made (dry runs)."""
    loop = asyncio.new_event_loop()
    running = loop.run_until_complete(start_proxy(make_settings("http://127.0.0.1:9/v1")))
    yield loop, running
    loop.run_until_complete(running.stop())
    loop.close()


async def _dry_run(proxy: RunningProxy, wire: ClientFormat, raw: bytes) -> dict[str, Any]:
    url = f"{proxy.url}/v1/context/prepare?format={wire.name}"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-test"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=raw, headers=headers) as response,
    ):
        assert response.status == 200, await response.text()
        answer: dict[str, Any] = await response.json()
        return answer


def dry_run(
    proxy: tuple[asyncio.AbstractEventLoop, RunningProxy], wire: ClientFormat, body: dict[str, Any]
) -> dict[str, Any]:
    loop, running = proxy
    return loop.run_until_complete(_dry_run(running, wire, dumps(body)))


def tool_result_texts(wire: ClientFormat, body: dict[str, Any]) -> list[str]:
    items = wire.items(body)
    return [t for item in items if wire.is_tool_result(item) and (t := wire.result_text(item))]


_CONDENSED = re.compile(r"\[ctxproxy#\d+: tool result condensed losslessly \((\w+)\)")


def condensed_results(wire: ClientFormat, body: dict[str, Any]) -> list[tuple[Any, str]]:
    """(transform, condensed text) of each condensed tool result in `body`."""
    found = [(m, t) for t in tool_result_texts(wire, body) if (m := _CONDENSED.match(t))]
    return [(m[1], t.split("]\n", 1)[1]) for m, t in found]


def _minified(text: str) -> str | None:
    try:
        return minify(json.loads(text))
    except ValueError:
        return None


def instructions(wire: ClientFormat, body: dict[str, Any]) -> list[Any]:
    """The system/developer items among the items (Claude Code's `system` message, Codex's
    developer messages and its `additional_tools` item)."""
    items = wire.items(body)
    conversation = wire.parse(items)
    units = conversation.units
    return items[: conversation.system_end] + [items[u.start] for u in units if u.instruction]


@pytest.mark.parametrize("path", FIXTURES, ids=ids)
def test_prepared_under_the_default_policy_keeping_what_the_agent_sent(
    proxy: tuple[asyncio.AbstractEventLoop, RunningProxy], path: Path
) -> None:
    wire, body = fixture(path)
    assert wire.parse(wire.items(body)).problems == ()
    answer = dry_run(proxy, wire, body)
    manifest, sent = answer["manifest"], answer["body"]
    assert manifest["policy"] == "default"
    assert manifest["outcome"] in ("within_trigger", "reduced")
    assert "invalid_forwarded" not in manifest["note_codes"]
    large = [t for t in tool_result_texts(wire, body) if len(t) > LARGE_RESULT_CHARS]
    steps = [action["step"] for action in manifest["actions"]]
    condensed = condensed_results(wire, sent)
    assert steps == (["condense_tool_results"] if condensed else []) + (
        ["offload_tool_results"] if large else []
    )
    assert answer["changed"] is bool(large or condensed)
    originals = tool_result_texts(wire, body)
    for kind, text in condensed:  # each condensed result holds exactly one of the originals
        restored = expand(Condensed(kind, text))
        assert any(restored in (t, _minified(t)) for t in originals)
    for key, value in body.items():  # context_management, output_config, thinking, include, ...
        if key not in (wire.items_param, "tools"):
            assert sent[key] == value, key
    client_tools = body.get("tools") or []
    assert sent.get("tools", [])[: len(client_tools)] == client_tools
    assert instructions(wire, sent) == instructions(wire, body)
    assert all(text not in json.dumps(sent) for text in large)


@pytest.mark.parametrize("path", FIXTURES, ids=ids)
def test_a_body_nothing_changes_goes_as_its_own_bytes(
    proxy: tuple[asyncio.AbstractEventLoop, RunningProxy], path: Path
) -> None:
    wire, body = fixture(path)
    items = wire.items(body)
    assert wire.encode(wire.render(body, items, [])) == dumps(body)  # items render back as sent
    loop, running = proxy
    raw = json.dumps(body).encode()  # the CLI's own bytes, not the proxy's serialisation
    preparer = running.services.started_preparer()
    inspected = loop.run_until_complete(preparer.prepare(body, raw, _Inspect(), wire))
    assert inspected.body is raw and not inspected.changed


class _Inspect:
    policy = "inspect"
    scope = "fixtures"
    contributor = ""


@pytest.mark.parametrize("path", FIXTURES, ids=ids)
def test_counted_within_3_percent_of_a_reference(path: Path) -> None:
    wire, body = fixture(path)
    counter = _COUNTERS.for_model(wire.model(body))
    assert counter.method != "estimate"
    counted = sum(counter.count_message(i) for i in wire.items(body))
    counted += wire.overhead_tokens(body, counter)
    if wire.name == "anthropic_messages":
        reference = _read_by_the_model(body, counter)
    else:
        reference = _litellm_count(body)
    assert abs(counted - reference) <= 0.03 * reference, (counted, reference)


_COUNTERS = shared_counters()


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _read_by_the_model(body: dict[str, Any], counter: TokenCounter) -> int:
    """An Anthropic request's text as the model reads it, counted plainly: every text, thinking
    and tool result, each tool call's name and input, and each tool definition as JSON (as
    Anthropic shows tools to its models), with no framing at all."""
    texts = list(_texts(body.get("system") or []))
    for message in body["messages"]:
        texts += _texts(message["content"])
    texts += [_compact(tool) for tool in body.get("tools") or []]
    return sum(counter.count_text(text) for text in texts)


def _texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
        return
    for block in content:
        kind = block.get("type")
        if kind == "text":
            yield block["text"]
        elif kind == "thinking":
            yield block["thinking"]
        elif kind == "tool_use":
            yield block["name"]
            yield _compact(block["input"])
        elif kind == "tool_result":
            yield from _texts(block.get("content") or "")
        else:
            yield _compact(block)


def _litellm_count(body: dict[str, Any]) -> int:
    """litellm's own count of a Responses body told as chat messages, its tools listed flat (no
    namespace): developer items as system messages, calls as tool calls, outputs as tool
    messages."""
    import litellm  # slow to import: only this test pays for it

    messages: list[dict[str, Any]] = []
    tools = [_flat_tool(t) for t in body.get("tools") or []]
    for item in body["input"]:
        kind = item.get("type", "message")
        if kind == "additional_tools":
            tools += [_flat_tool(t) for t in _flattened(item["tools"])]
        elif kind == "message":
            role = "system" if item["role"] == "developer" else item["role"]
            messages.append({"role": role, "content": _joined(item["content"])})
        elif kind.endswith("_call"):
            function = {"name": item["name"], "arguments": item.get("arguments", item.get("input"))}
            call = {"id": item["call_id"], "type": "function", "function": function}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind.endswith("_call_output"):
            text = _joined(item["output"])
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": text})
        else:
            messages.append({"role": "user", "content": _compact(item)})
    count = litellm.token_counter(model="gpt-4o", messages=messages, tools=tools or None)  # type: ignore[arg-type]
    return int(count)


def _flattened(tools: list[Any]) -> Iterator[Any]:
    for tool in tools:
        yield from _flattened(tool["tools"]) if "tools" in tool else [tool]


def _flat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fields = {k: v for k, v in tool.items() if k in ("name", "description", "parameters")}
    return {"type": "function", "function": fields}


def _joined(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))
