"""The hostile run's scripted upstream (bench/hostile/upstream.py) calls the proxy's tools, not a
client's tool of the same name, and writes bad call ids as they are."""

from __future__ import annotations

import json
from typing import Any

from fakes import Recorded
from multidict import CIMultiDict

from bench.hostile.cases import CLIENT_TOOLS
from bench.hostile.upstream import proxy_tool, scripted
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.answers import with_unique_tool_names
from proxy.synthetic.registry import tool_specs

ARTIFACT = "art_" + "0" * 32


def offered(client_tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A body as the proxy sends it: the client's tools, then its own (renamed if they clash)."""
    own = OPENAI_CHAT.synthetic_tools(tool_specs(20_000))
    body = {"model": "m", "messages": [{"role": "tool", "content": ARTIFACT}]}
    renamed, _ = with_unique_tool_names({**body, "tools": client_tools + own})
    return renamed


def test_the_proxys_tool_is_found_whatever_its_name() -> None:
    assert proxy_tool(offered([]), "read_context_artifact") == "read_context_artifact"
    clashing = offered(CLIENT_TOOLS)
    assert proxy_tool(clashing, "read_context_artifact") == "read_context_artifact_ctxproxy"
    assert proxy_tool(clashing, "search_context_artifact") == "search_context_artifact_ctxproxy"
    assert proxy_tool({"tools": CLIENT_TOOLS}, "read_context_artifact") is None


def record(body: dict[str, Any], script: str, number: int, stream: bool) -> Recorded:
    headers = CIMultiDict({"x-hostile-script": script, "x-hostile-request": str(number)})
    raw = json.dumps({**body, "stream": stream}).encode()
    return Recorded("POST", "/v1/chat/completions", "", headers, raw)


def test_bad_ids_are_sent_missing_null_empty_and_duplicated() -> None:
    seen: list[tuple[int, str]] = []
    choose = scripted(lambda number, path, _: seen.append((number, path)))
    body = offered([])
    ids = []
    for number in range(4):
        reply: Any = choose(record(body, "bad_ids", number, stream=False))
        calls = reply.body["choices"][0]["message"]["tool_calls"]
        ids.append([call.get("id", "missing") for call in calls])
    assert ids == [["missing"], [None], ["", ""], ["call_dup", "call_dup"]]
    assert seen == [(n, "/v1/chat/completions") for n in range(4)]
    streamed: Any = choose(record(body, "bad_ids", 0, stream=True))
    firsts = [
        delta
        for event in streamed.events
        for choice in event["choices"]
        for delta in choice["delta"].get("tool_calls") or ()
        if "type" in delta
    ]
    assert len(firsts) == 1 and "id" not in firsts[0]


def test_a_body_too_deep_for_the_fakes_parser_is_a_400_not_a_crash() -> None:
    choose = scripted(lambda *_: None)
    deep = Recorded(
        "POST", "/v1/chat/completions", "", CIMultiDict({"x-hostile-script": "read"}), b"[" * 10**5
    )
    reply: Any = choose(deep)
    assert reply.status == 400
