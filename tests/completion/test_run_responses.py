"""One completion in the Responses format: the upstream route, and the read loop (reasoning kept
with the proxy's calls upstream, hidden from the client, usage summed)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest
from completion_harness import make_context, stored
from upstream_double import UpstreamDouble, json_answer

from proxy.artifacts.store import MemoryStore
from proxy.completion.rounds import READS_HEADER, ROUNDS_HEADER
from proxy.completion.run import run_completion
from proxy.engine.manifest import Manifest, Prepared, SyntheticTools
from proxy.formats.openai_responses import OPENAI_RESPONSES
from proxy.jsonio import dumps, loads
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.registry import tool_specs
from proxy.tokens.calibration import CountCalibration
from proxy.tokens.calibration_rule import AppliedRatio, CalibrationKey, RatioSource

INPUT = [{"role": "user", "content": "what was in the log?"}]
REASONING = {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc", "summary": []}
ANSWER = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "It says hello."}],
}


def prepared(synthetic: bool) -> Prepared:
    body: dict[str, Any] = {"model": "gpt-5", "input": copy.deepcopy(INPUT), "store": False}
    if synthetic:
        body["tools"] = OPENAI_RESPONSES.synthetic_tools(tool_specs(4000))
    tools = SyntheticTools(2, max_page_chars=4000) if synthetic else None
    manifest = Manifest(policy="p", model="gpt-5", mode="window", tokens_before=10, tokens_after=5)
    return Prepared(dumps(body), True, manifest, body, tools)


def response(*output: Any, input_tokens: int = 10) -> dict[str, Any]:
    return {
        "id": "resp_x",
        "object": "response",
        "output": list(output),
        "usage": {"input_tokens": input_tokens, "output_tokens": 2},
    }


async def test_a_plain_answer_goes_to_the_responses_route_and_back_byte_for_byte() -> None:
    raw = b'{"id": "resp_1",  "object": "response", "output": []}'
    upstream = UpstreamDouble(json_answer(raw))
    context = replace(make_context(upstream), wire=OPENAI_RESPONSES)
    request = prepared(synthetic=False)
    reply = await run_completion(context, request)
    assert (reply.status, reply.body) == (200, raw)
    [call] = upstream.calls
    assert (call.method, call.path, call.body) == ("POST", "/responses", request.body)


async def test_a_read_round_is_executed_with_its_reasoning_and_hidden() -> None:
    store = MemoryStore(b"secret")
    artifact = await stored(store, "hello from the log " * 20)
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_r",
        "name": READ_TOOL,
        "arguments": json.dumps({"artifact_id": artifact, "max_chars": 50}),
    }
    upstream = UpstreamDouble(
        json_answer(response(REASONING, call, input_tokens=10)),
        json_answer(response(ANSWER, input_tokens=30)),
    )
    context = replace(make_context(upstream, store), wire=OPENAI_RESPONSES)
    reply = await run_completion(context, prepared(synthetic=True))
    assert reply.body is not None
    payload = loads(reply.body)
    assert payload["output"] == [ANSWER]
    assert payload["usage"] == {"input_tokens": 40, "output_tokens": 4}
    assert (reply.headers[ROUNDS_HEADER], reply.headers[READS_HEADER]) == ("1", "1")
    assert [c.path for c in upstream.calls] == ["/responses", "/responses"]
    second = upstream.bodies[1]["input"]
    assert second[1:3] == [REASONING, call]
    page = json.loads(second[3]["output"])
    assert second[3]["call_id"] == "call_r" and page["content"] == ("hello from the log " * 20)[:50]
    assert upstream.all_closed


async def test_the_input_tokens_of_a_json_answer_feed_the_calibration() -> None:
    upstream = UpstreamDouble(*[json_answer(response(ANSWER, input_tokens=1200))] * 3)
    calibration = CountCalibration(min_counted_tokens=1)
    context = replace(
        make_context(upstream), wire=OPENAI_RESPONSES, calibration=calibration, contributor="c"
    )
    request = prepared(synthetic=False)
    request.manifest.counting_method = "tiktoken:o200k_base"
    request.manifest.tokens_after = 1000
    for _ in range(3):
        await run_completion(context, request)
    ratio = calibration.applied(CalibrationKey("fake", "gpt-5"), "c")
    assert ratio == AppliedRatio(pytest.approx(1.2), RatioSource.own)
