"""The hostile run's scripted Responses upstream (bench/hostile/upstream_responses.py): it calls
the proxy's tools (renamed or not) after a reasoning item, hands every output it answers with to
the run, writes bad call ids as they are, and fails later rounds on purpose."""

from __future__ import annotations

import json
from typing import Any

from fakes import Recorded
from fakes.replies import JsonReply, SSEReply
from multidict import CIMultiDict

from bench.hostile.responses import CLIENT_TOOLS
from bench.hostile.upstream import scripted
from bench.hostile.upstream_responses import proxy_tool
from proxy.formats.openai_responses import OPENAI_RESPONSES
from proxy.synthetic.registry import tool_specs

ARTIFACT = "art_" + "0" * 32


def offered(client_tools: list[Any], *extra: Any) -> dict[str, Any]:
    own = OPENAI_RESPONSES.synthetic_tools(tool_specs(20_000))
    items = [{"type": "function_call_output", "call_id": "c", "output": ARTIFACT}, *extra]
    body = {"model": "m", "input": items, "tools": client_tools + own}
    renamed, _ = OPENAI_RESPONSES.with_unique_tool_names(body)
    return renamed


def record(body: dict[str, Any], script: str, number: int, stream: bool) -> Recorded:
    headers = CIMultiDict({"x-hostile-script": script, "x-hostile-request": str(number)})
    raw = json.dumps({**body, "stream": stream}).encode()
    return Recorded("POST", "/v1/responses", "", headers, raw)


def test_the_proxys_tool_is_found_whatever_its_name() -> None:
    assert proxy_tool(offered([]), "read_context_artifact") == "read_context_artifact"
    clashing = offered(CLIENT_TOOLS)
    assert proxy_tool(clashing, "read_context_artifact") == "read_context_artifact_ctxproxy"
    assert proxy_tool({"tools": CLIENT_TOOLS}, "read_context_artifact") is None


def test_read_calls_come_after_reasoning_and_are_handed_over() -> None:
    outputs: list[tuple[int, list[Any]]] = []
    choose = scripted(lambda *_: None, lambda n, items: outputs.append((n, items)))
    reply: Any = choose(record(offered([]), "read", 2, stream=False))
    assert isinstance(reply, JsonReply)
    output = reply.body["output"]
    assert [i["type"] for i in output] == ["reasoning", "function_call"]
    assert json.loads(output[1]["arguments"])["artifact_id"] == ARTIFACT
    assert outputs == [(2, output)]
    mixed: Any = choose(record(offered(CLIENT_TOOLS), "mixed", 3, stream=False))
    names = [i.get("name") for i in mixed.body["output"]]
    assert names == [None, "read_context_artifact_ctxproxy", "read_context_artifact"]


def test_bad_ids_are_written_as_they_are() -> None:
    choose = scripted(lambda *_: None)
    ids = []
    for number in range(4):
        reply: Any = choose(record(offered([]), "bad_ids", number, stream=False))
        ids.append([i.get("call_id", "missing") for i in reply.body["output"][1:]])
    assert ids == [["missing"], [None], ["", ""], ["call_h3_0", "call_h3_0"]]


def test_faults_come_in_the_round_after_a_read() -> None:
    choose = scripted(lambda *_: None)
    answered = {"type": "function_call_output", "call_id": "call_h7_0", "output": "page"}
    later = offered([], answered)
    cut: Any = choose(record(later, "r_cut", 7, stream=True))
    assert isinstance(cut, SSEReply) and cut.abort_after == 4
    eof: Any = choose(record(later, "r_eof_later", 7, stream=True))
    assert b"response.completed" not in b"".join(eof.payloads())
    first: Any = choose(record(offered([]), "r_eof", 7, stream=True))
    sent = b"".join(first.payloads())
    assert b"read_context_artifact" in sent and b"response.completed" not in sent
    failed: Any = choose(record(later, "r_failed", 7, stream=False))
    assert failed.body["status"] == "failed"
