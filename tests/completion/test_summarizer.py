"""completion/summarizer.py: the summarizer over the Upstream seam (an in-memory upstream)."""

from __future__ import annotations

import asyncio

import pytest
from multidict import CIMultiDict
from upstream_double import Answer, Call, UpstreamDouble, broken, json_answer

from proxy.completion.summarizer import MAX_ANSWER_BYTES, UpstreamSummarizer
from proxy.engine.steps.summarize.summarizer import (
    SCHEMA_NAME,
    SummarizerError,
    SummaryCall,
    SummaryShape,
)
from proxy.formats.openai_chat.summary import strict_schema
from proxy.settings import UpstreamSettings
from proxy.upstream.base import Upstream

CALL = SummaryCall("instructions", "", "user: hi", 200, None, None)
ANSWER = {"model": "m-2024", "choices": [{"message": {"role": "assistant", "content": "{}"}}],
          "usage": {"prompt_tokens": 12, "completion_tokens": 3, "cached": "x"}}


def summarizer(route: UpstreamDouble, **others: UpstreamDouble) -> UpstreamSummarizer:
    def headers_for(upstream: Upstream) -> CIMultiDict[str]:
        return CIMultiDict({"Authorization": f"Bearer key-of-{upstream.name}"})

    return UpstreamSummarizer(route, {"route": route, **others}, headers_for, "req-model")


def test_one_call_with_the_requests_model_and_route_by_default() -> None:
    route = UpstreamDouble(json_answer(ANSWER))
    reply = asyncio.run(summarizer(route).summarize(CALL))
    assert (reply.answer, reply.model) == ("{}", "m-2024")
    assert reply.usage == {"prompt_tokens": 12, "completion_tokens": 3}
    [call] = route.calls
    body = call.json()
    assert body["model"] == "req-model" and body["max_tokens"] == 200
    assert body["stream"] is False and body["temperature"] == 0
    assert body["messages"][0] == {"role": "system", "content": "instructions"}
    assert body["messages"][1]["content"] == "Turns to fold in:\nuser: hi"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": SCHEMA_NAME,
            "strict": True,
            "schema": strict_schema(SummaryShape.model_json_schema()),
        },
    }
    assert call.headers["Authorization"] == "Bearer key-of-fake"
    assert call.headers["Content-Type"] == "application/json"
    assert route.all_closed


def test_a_named_upstream_and_model_and_the_previous_summary() -> None:
    route, other = UpstreamDouble(), UpstreamDouble(json_answer(ANSWER), name="cheap")
    call = SummaryCall("i", "Facts:\n- a: 1", "user: hi", 50, "tiny", "cheap")
    asyncio.run(summarizer(route, cheap=other).summarize(call))
    assert route.calls == [] and other.calls[0].json()["model"] == "tiny"
    assert other.calls[0].headers["Authorization"] == "Bearer key-of-cheap"
    assert other.calls[0].json()["messages"][1]["content"].startswith(
        "Previous summary (JSON-rendered):\nFacts:\n- a: 1\n\nTurns to fold in:"
    )


@pytest.mark.parametrize(
    ("scripted", "failure"),
    [
        (broken(), "upstream"),
        (json_answer({"error": {"message": "no"}}, status=503), "upstream"),
        (json_answer(b"not json"), "invalid"),
        (json_answer({"choices": []}), "invalid"),
        (json_answer(b" " * (MAX_ANSWER_BYTES + 1)), "invalid"),
    ],
)
def test_every_failure_is_a_summarizer_error(scripted: object, failure: str) -> None:
    route = UpstreamDouble(scripted)  # type: ignore[arg-type]
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(summarizer(route).summarize(CALL))
    assert caught.value.failure == failure
    assert route.all_closed


@pytest.mark.parametrize("status", [400, 422, 500])
def test_a_refused_form_is_followed_by_the_next_then_none(status: int) -> None:
    refused = json_answer({"error": {"message": "response_format is not supported"}}, status)
    route = UpstreamDouble(refused, refused, json_answer(ANSWER), json_answer(ANSWER))
    one = summarizer(route)
    reply = asyncio.run(one.summarize(CALL))
    assert reply.answer == "{}"
    first, second, third = (call.json() for call in route.calls)
    schema = strict_schema(SummaryShape.model_json_schema())
    assert first["response_format"]["type"] == "json_schema"
    assert second["response_format"] == {"type": "json_object", "schema": schema}
    assert third == {k: v for k, v in first.items() if k != "response_format"}
    asyncio.run(one.summarize(CALL))  # nothing remembered: the next call asks for it again
    assert len(route.calls) == 4 and route.calls[3].json() == first
    assert route.all_closed


def test_a_server_that_knows_only_json_object_gets_the_schema_that_way() -> None:
    def llama_cpp_python(call: Call) -> Answer:  # its response_format: json_object (+ schema)
        kind = call.json().get("response_format", {}).get("type")
        return json_answer(ANSWER) if kind == "json_object" else json_answer({"detail": []}, 422)

    route = UpstreamDouble(handler=llama_cpp_python)
    assert asyncio.run(summarizer(route).summarize(CALL)).answer == "{}"
    assert [c.json()["response_format"]["type"] for c in route.calls] == [
        "json_schema", "json_object"
    ]


def test_refused_in_every_form_or_another_status_is_a_failure_without_more_calls() -> None:
    refused = json_answer({"error": {"message": "bad request"}}, 400)
    route = UpstreamDouble(refused, refused, refused, json_answer(ANSWER))
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(summarizer(route).summarize(CALL))
    assert caught.value.failure == "upstream" and len(route.calls) == 3
    for status in (401, 429, 503):  # not a matter of the form: no other form asked
        failing = UpstreamDouble(json_answer({"error": {}}, status), json_answer(ANSWER))
        with pytest.raises(SummarizerError):
            asyncio.run(summarizer(failing).summarize(CALL))
        assert len(failing.calls) == 1 and failing.all_closed
    assert route.all_closed


def test_an_unknown_upstream_name_is_a_failure() -> None:
    call = SummaryCall("i", "", "t", 5, None, "nowhere")
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(summarizer(UpstreamDouble()).summarize(call))
    assert caught.value.failure == "upstream"


MESSAGES_ANSWER = {
    "model": "claude-x", "content": [{"type": "text", "text": "{}"}],
    "usage": {"input_tokens": 12, "cache_read_input_tokens": 4, "output_tokens": 3},
}


def anthropic(*script: Answer) -> UpstreamDouble:
    upstream = UpstreamDouble(*script, name="claude", native_format="anthropic_messages")
    upstream.settings = UpstreamSettings(
        name="claude", base_url="http://upstream.invalid", kind="anthropic"
    )
    return upstream


def test_an_anthropic_upstream_is_asked_in_messages_without_structured_output() -> None:
    route = anthropic(json_answer(MESSAGES_ANSWER))
    reply = asyncio.run(summarizer(route).summarize(CALL))
    assert (reply.answer, reply.model) == ("{}", "claude-x")
    assert reply.usage == {"prompt_tokens": 16, "completion_tokens": 3}
    [call] = route.calls
    assert call.path == "/messages"
    assert call.json() == {
        "model": "req-model", "system": "instructions",
        "messages": [{"role": "user", "content": "Turns to fold in:\nuser: hi"}],
        "max_tokens": 200, "temperature": 0, "stream": False,
    }
    assert route.all_closed


def test_an_anthropic_refusal_is_not_retried_in_other_forms() -> None:
    route = anthropic(json_answer({"type": "error", "error": {"type": "invalid_request_error"}},
                                  status=400))
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(summarizer(route).summarize(CALL))
    assert caught.value.failure == "upstream" and len(route.calls) == 1
    # a chat answer read as Messages has no text: invalid, not a crash
    route = anthropic(json_answer(ANSWER))
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(summarizer(route).summarize(CALL))
    assert caught.value.failure == "invalid"


def test_llama_cpp_pythons_500_for_an_unknown_form_leads_to_the_json_object_form() -> None:
    def server(call: Call) -> Answer:  # as seen in bench/real_upstream/run.sh's llama.log
        kind = call.json().get("response_format", {}).get("type")
        if kind == "json_schema":
            return json_answer({"detail": "Input should be 'text' or 'json_object'"}, 500)
        return json_answer(ANSWER)

    route = UpstreamDouble(handler=server)
    assert asyncio.run(summarizer(route).summarize(CALL)).answer == "{}"
    assert [c.json()["response_format"]["type"] for c in route.calls] == [
        "json_schema", "json_object"
    ]


def test_an_answer_over_its_cap_is_not_read_to_its_end() -> None:
    chunks = [b" " * 65536] * (4 * MAX_ANSWER_BYTES // 65536)
    route = UpstreamDouble(Answer(chunks=chunks))
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(summarizer(route).summarize(CALL))
    assert caught.value.failure == "invalid"
    delivered = route.responses[0].delivered
    assert MAX_ANSWER_BYTES < sum(map(len, delivered)) <= MAX_ANSWER_BYTES + 65536
    assert route.all_closed
