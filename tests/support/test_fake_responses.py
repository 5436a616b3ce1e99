"""The fake upstream's Responses API is understood by the real `openai` SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import openai
import pytest
from fakes import (
    FakeUpstream,
    function_call_item,
    message_item,
    reasoning_item,
    response_json,
    response_stream,
    responses_error,
    responses_usage,
)

REASONING = reasoning_item("rs_1", "gAAAA-encrypted==", summary=["Thinking about the weather."])
CALL = function_call_item("get_weather", '{"city": "Edinburgh"}', call_id="call_1")


@pytest.fixture
async def sdk(fake_upstream: FakeUpstream) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=fake_upstream.base_url, api_key="test", max_retries=0, timeout=5.0
    ) as client:
        yield client


async def test_default_echoes_the_last_user_input_and_records_the_body(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    answer = await sdk.responses.create(
        model="gpt-5", input=[{"role": "user", "content": "hello there"}]
    )
    assert answer.output_text == "echo: hello there"
    assert answer.usage is not None and answer.usage.input_tokens > 0
    assert fake_upstream.last.path == "/v1/responses"
    assert fake_upstream.last.json()["input"][0]["content"] == "hello there"


async def test_json_answer_with_reasoning_and_a_function_call(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    fake_upstream.enqueue(response_json([REASONING, CALL], usage=responses_usage(70, 9)))
    answer = await sdk.responses.create(model="gpt-5", input="weather?")
    reasoning, call = answer.output
    assert reasoning.type == "reasoning" and reasoning.encrypted_content == "gAAAA-encrypted=="
    assert call.type == "function_call" and call.call_id == "call_1"
    assert json.loads(call.arguments) == {"city": "Edinburgh"}
    assert answer.usage is not None
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (70, 9)


async def test_stream_events_rebuild_the_same_response(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    output = [REASONING, message_item("Let me check."), CALL]
    fake_upstream.enqueue(response_stream(output, usage=responses_usage(12, 3)))
    stream = await sdk.responses.create(model="gpt-5", input="hi", stream=True)
    types, text, arguments = [], "", ""
    final = None
    async for event in stream:
        types.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
        elif event.type == "response.function_call_arguments.delta":
            arguments += event.delta
        elif event.type == "response.completed":
            final = event.response
    assert types[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert types[-1] == "response.completed"
    assert text == "Let me check." and json.loads(arguments) == {"city": "Edinburgh"}
    assert final is not None and [item.type for item in final.output] == [
        "reasoning",
        "message",
        "function_call",
    ]
    assert final.usage is not None and final.usage.total_tokens == 15


async def test_stream_has_no_done_marker_and_numbers_its_events(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    reply = response_stream([message_item("a b")])
    payloads = reply.payloads()
    assert not any(b"[DONE]" in p for p in payloads)
    numbers = [json.loads(p.split(b"data: ", 1)[1])["sequence_number"] for p in payloads]
    assert numbers == list(range(len(payloads)))
    assert all(p.startswith(b"event: response.") for p in payloads)


async def test_errors_reach_the_sdk_with_their_code(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    fake_upstream.enqueue(
        responses_error(
            400, "Your input exceeds the context window.", code="context_length_exceeded"
        )
    )
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="gpt-5", input="x")
    assert caught.value.code == "context_length_exceeded"
