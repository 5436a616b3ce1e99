"""The fake upstream speaks the OpenAI wire format well enough for the real SDK and raw clients."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from fakes import (
    FakeUpstream,
    Recorded,
    Reply,
    completion,
    dynamic_reply,
    error_reply,
    invalid_json_reply,
    json_reply,
    make_usage,
    never_reply,
    replay_file,
    reset_reply,
    slow_reply,
    sse_reply,
    stream_chunks,
    stream_completion,
)
from fakes.wire import SHARED_WIRE_DIR, VENDORED_WIRE_DIR
from openai.types.chat import ChatCompletionMessageParam

USER: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the weather in Edinburgh today?"}
]
WEATHER_CALL = {"name": "get_weather", "arguments": {"city": "Edinburgh", "units": "c"}}
STOCK_CALL = {"id": "call_stock_1", "name": "get_stock_price", "arguments": '{"ticker":"AAPL"}'}


SdkFactory = Callable[..., openai.AsyncOpenAI]


@pytest.fixture
async def sdk(fake_upstream: FakeUpstream) -> AsyncIterator[SdkFactory]:
    """Makes AsyncOpenAI clients for the fake (no retries, 5 s timeout) and closes them after."""
    clients: list[openai.AsyncOpenAI] = []

    def make(**kwargs: Any) -> openai.AsyncOpenAI:
        options: dict[str, Any] = {"max_retries": 0, "timeout": 5.0, **kwargs}
        client = openai.AsyncOpenAI(base_url=fake_upstream.base_url, api_key="test", **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


def sse_data(raw: bytes) -> list[str]:
    """The `data:` payloads of an SSE body, in order."""
    return [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]


# -- lifecycle --------------------------------------------------------------------------------


async def test_binds_a_free_local_port_and_stops() -> None:
    fake = FakeUpstream()
    with pytest.raises(RuntimeError):
        _ = fake.base_url
    async with fake:
        assert fake.base_url == f"http://127.0.0.1:{fake.port}/v1"
        assert fake.port > 0
        async with aiohttp.ClientSession() as session, session.get(fake.origin + "/v1/models") as r:
            assert r.status == 200
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectorError):
            await session.get(fake.origin + "/v1/models")


async def test_two_fakes_get_different_ports() -> None:
    async with FakeUpstream() as one, FakeUpstream() as two:
        assert one.port != two.port


# -- non-streaming ----------------------------------------------------------------------------


async def test_sdk_non_stream_scripted_completion(
    fake_upstream: FakeUpstream, sdk: SdkFactory
) -> None:
    fake_upstream.enqueue(
        completion("Sunny, 18C.", usage=make_usage(21, 5), model="gpt-4o-2024-08-06", id="cc-1")
    )
    answer = await sdk().chat.completions.create(model="gpt-4o", messages=USER)

    assert answer.id == "cc-1"
    assert answer.model == "gpt-4o-2024-08-06"
    assert answer.choices[0].message.content == "Sunny, 18C."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (21, 5)
    assert answer.usage.total_tokens == 26
    record = fake_upstream.last
    assert (record.method, record.path) == ("POST", "/v1/chat/completions")
    assert record.headers["Authorization"] == "Bearer test"
    assert record.json() == {"messages": USER, "model": "gpt-4o"}


async def test_default_reply_echoes_last_user_message(
    fake_upstream: FakeUpstream, sdk: SdkFactory
) -> None:
    long_text = "x" * 80
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": [{"type": "text", "text": long_text}]},
    ]
    answer = await sdk().chat.completions.create(model="my-model", messages=messages)

    assert answer.choices[0].message.content == "echo: " + "x" * 50
    assert answer.model == "my-model"
    assert answer.object == "chat.completion"


async def test_non_stream_tool_calls(fake_upstream: FakeUpstream, sdk: SdkFactory) -> None:
    fake_upstream.enqueue(completion(None, tool_calls=[WEATHER_CALL, STOCK_CALL]))
    answer = await sdk().chat.completions.create(model="gpt-4o", messages=USER)

    calls = answer.choices[0].message.tool_calls
    assert calls is not None
    assert answer.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in calls] == ["get_weather", "get_stock_price"]  # type: ignore[union-attr]
    assert json.loads(calls[0].function.arguments) == WEATHER_CALL["arguments"]  # type: ignore[union-attr]
    assert calls[0].id.startswith("call_")
    assert calls[1].id == "call_stock_1"


async def test_sync_client_in_a_thread(fake_upstream: FakeUpstream) -> None:
    fake_upstream.enqueue(completion("from a thread"))

    def call() -> str | None:
        client = openai.OpenAI(base_url=fake_upstream.base_url, api_key="test", max_retries=0)
        with client:
            answer = client.chat.completions.create(model="m", messages=USER)
        return answer.choices[0].message.content

    assert await asyncio.to_thread(call) == "from a thread"
    assert fake_upstream.completed == 1


# -- streaming --------------------------------------------------------------------------------


async def test_sdk_streams_text_with_usage_chunk(
    fake_upstream: FakeUpstream, sdk: SdkFactory
) -> None:
    fake_upstream.enqueue(stream_completion(["Sun", "ny", ", 18C."], usage=make_usage(30, 4)))
    stream = await sdk().chat.completions.create(
        model="gpt-4o", messages=USER, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Sunny, 18C."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 34


async def test_default_stream_follows_include_usage(
    fake_upstream: FakeUpstream, sdk: SdkFactory
) -> None:
    client = sdk()
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "stream me please"}]
    with_usage = await client.chat.completions.create(
        model="m", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in with_usage]
    without = [
        c
        async for c in await client.chat.completions.create(
            model="m", messages=messages, stream=True
        )
    ]

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "echo: stream me please"
    )
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert all(c.usage is None and c.choices for c in without)


async def test_sdk_accumulates_streamed_tool_calls(
    fake_upstream: FakeUpstream, sdk: SdkFactory
) -> None:
    fake_upstream.enqueue(
        stream_completion(["Checking."], tool_calls=[WEATHER_CALL, STOCK_CALL], arg_chunk=3)
    )
    async with sdk().chat.completions.stream(model="gpt-4o", messages=USER) as s:
        final = await s.get_final_completion()

    message = final.choices[0].message
    assert message.content == "Checking."
    assert final.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls is not None
    names = [c.function.name for c in message.tool_calls]
    assert names == ["get_weather", "get_stock_price"]
    arguments = [json.loads(c.function.arguments) for c in message.tool_calls]
    assert arguments == [WEATHER_CALL["arguments"], {"ticker": "AAPL"}]
    assert message.tool_calls[1].id == "call_stock_1"


async def test_replayed_recording_accumulates_in_sdk(
    fake_upstream: FakeUpstream, sdk: SdkFactory, parallel_tool_calls_sse: Path
) -> None:
    fake_upstream.enqueue(replay_file(parallel_tool_calls_sse, chunk_size=97))
    async with sdk().chat.completions.stream(model="gpt-4o", messages=USER) as s:
        final = await s.get_final_completion()

    calls = final.choices[0].message.tool_calls
    assert calls is not None
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        (
            "call_JMW1whyEaYG438VE1OIflxA2",
            "GetWeatherArgs",
            '{"city": "Edinburgh", "country": "GB", "units": "c"}',
        ),
        (
            "call_DNYTawLBoN8fj3KN6qU9N1Ou",
            "get_stock_price",
            '{"ticker": "AAPL", "exchange": "NASDAQ"}',
        ),
    ]
    assert final.choices[0].finish_reason == "tool_calls"
    assert final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (149, 60)


@pytest.mark.parametrize("chunk_size", [None, 1, 64])
async def test_replay_is_byte_for_byte(
    fake_upstream: FakeUpstream, parallel_tool_calls_sse: Path, chunk_size: int | None
) -> None:
    fake_upstream.enqueue(replay_file(parallel_tool_calls_sse, chunk_size=chunk_size))
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            fake_upstream.base_url + "/chat/completions", json={"stream": True}
        ) as response,
    ):
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert await response.read() == parallel_tool_calls_sse.read_bytes()


def test_stream_chunks_match_recorded_shape(parallel_tool_calls_sse: Path) -> None:
    recorded = [json.loads(d) for d in sse_data(parallel_tool_calls_sse.read_bytes())[:-1]]
    ours = stream_chunks([], tool_calls=[WEATHER_CALL, STOCK_CALL], include_usage=True)

    assert [set(c) for c in ours[:-1]] == [set(recorded[0])] * (len(ours) - 1)
    assert ours[0]["choices"][0]["delta"] == recorded[0]["choices"][0]["delta"]
    first_call = recorded[1]["choices"][0]["delta"]["tool_calls"][0]
    our_first_call = ours[1]["choices"][0]["delta"]["tool_calls"][0]
    assert set(our_first_call) == set(first_call)
    assert our_first_call["function"]["arguments"] == first_call["function"]["arguments"] == ""
    fragment = ours[2]["choices"][0]["delta"]["tool_calls"][0]
    assert set(fragment) == set(recorded[2]["choices"][0]["delta"]["tool_calls"][0])
    finish = next(c for c in recorded if c["choices"] and c["choices"][0]["finish_reason"])
    assert ours[-2]["choices"] == [{**finish["choices"][0]}]
    assert ours[-1]["choices"] == recorded[-1]["choices"] == []
    assert "usage" in ours[-1]


async def test_sse_reply_sends_raw_events_verbatim(fake_upstream: FakeUpstream) -> None:
    fake_upstream.enqueue(
        sse_reply([{"a": 1}, ": keep-alive comment\n\n", b"data: {not json\n\n"], done=False)
    )
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            fake_upstream.base_url + "/chat/completions", json={"stream": True}
        ) as response,
    ):
        body = await response.read()
    assert body == b'data: {"a":1}\n\n: keep-alive comment\n\ndata: {not json\n\n'


async def test_sse_reply_delay_spaces_events(fake_upstream: FakeUpstream) -> None:
    fake_upstream.enqueue(sse_reply([{"n": 1}, {"n": 2}, {"n": 3}], delay_s=0.05))
    started = time.monotonic()
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            fake_upstream.base_url + "/chat/completions", json={"stream": True}
        ) as response,
    ):
        body = await response.read()
    assert time.monotonic() - started >= 0.14
    assert sse_data(body) == ['{"n":1}', '{"n":2}', '{"n":3}', "[DONE]"]


# -- errors and broken connections ------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
async def test_error_statuses_surface_as_typed_sdk_errors(
    fake_upstream: FakeUpstream,
    sdk: SdkFactory,
    status: int,
    error_type: type[openai.APIStatusError],
) -> None:
    fake_upstream.enqueue(error_reply(status))
    with pytest.raises(error_type) as caught:
        await sdk().chat.completions.create(model="m", messages=USER)

    assert caught.value.status_code == status
    assert isinstance(caught.value.body, dict) and caught.value.body["message"]
    assert caught.value.response.headers.get("retry-after") == ("1" if status == 429 else None)
    assert len(fake_upstream.received) == 1


async def test_rate_limit_envelope_and_custom_body(
    fake_upstream: FakeUpstream, sdk: SdkFactory
) -> None:
    body = {"error": {"message": "slow down", "type": "requests", "param": None, "code": "rl"}}
    fake_upstream.enqueue(error_reply(429, body, retry_after=7))
    with pytest.raises(openai.RateLimitError) as caught:
        await sdk().chat.completions.create(model="m", messages=USER)

    assert caught.value.code == "rl"
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.response.headers["x-request-id"].startswith("req_")


async def test_sdk_retries_through_the_queue(fake_upstream: FakeUpstream, sdk: SdkFactory) -> None:
    rate_limited = error_reply(429, headers={"retry-after-ms": "10"}, retry_after=None)
    fake_upstream.enqueue_many(rate_limited, completion("second time lucky"))
    answer = await sdk(max_retries=1).chat.completions.create(model="m", messages=USER)

    assert answer.choices[0].message.content == "second time lucky"
    assert len(fake_upstream.received) == 2
    assert fake_upstream.pending == 0


async def test_abort_mid_stream_raises_in_the_sdk(
    fake_upstream: FakeUpstream, sdk: SdkFactory
) -> None:
    fake_upstream.enqueue(stream_completion(["one", "two", "three"], abort_after=2))
    received: list[str] = []
    stream = await sdk().chat.completions.create(model="m", messages=USER, stream=True)
    with pytest.raises(openai.APIConnectionError):
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")

    assert received == ["", "one"]
    await fake_upstream.wait_idle()
    assert fake_upstream.completed == 1 and fake_upstream.errors == []


async def test_abort_breaks_the_chunked_body_for_raw_clients(fake_upstream: FakeUpstream) -> None:
    fake_upstream.enqueue(sse_reply([{"n": 1}, {"n": 2}, {"n": 3}], abort_after=2))
    lines: list[bytes] = []
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            fake_upstream.base_url + "/chat/completions", json={"stream": True}
        ) as response,
    ):
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            async for line in response.content:
                lines.append(line)

    assert b"".join(lines) == b'data: {"n":1}\n\ndata: {"n":2}\n\n'


async def test_reset_before_headers(fake_upstream: FakeUpstream, sdk: SdkFactory) -> None:
    fake_upstream.enqueue(reset_reply())
    with pytest.raises(openai.APIConnectionError):
        await sdk().chat.completions.create(model="m", messages=USER)
    assert len(fake_upstream.received) == 1


async def test_reset_mid_body(fake_upstream: FakeUpstream) -> None:
    fake_upstream.enqueue(reset_reply(after_bytes=20))
    async with (
        aiohttp.ClientSession() as session,
        session.post(fake_upstream.base_url + "/chat/completions", json={}) as response,
    ):
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()


async def test_invalid_json_reply(fake_upstream: FakeUpstream, sdk: SdkFactory) -> None:
    fake_upstream.enqueue_many(invalid_json_reply(), invalid_json_reply())
    with pytest.raises(ValueError):
        await sdk().chat.completions.create(model="m", messages=USER)
    async with (
        aiohttp.ClientSession() as session,
        session.post(fake_upstream.base_url + "/chat/completions", json={}) as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        with pytest.raises(ValueError):
            json.loads(await response.read())


# -- slow, hanging and leaking handlers -------------------------------------------------------


async def test_slow_reply_delays_the_headers(fake_upstream: FakeUpstream, sdk: SdkFactory) -> None:
    fake_upstream.enqueue(slow_reply(0.2, then=completion("late")))
    started = time.monotonic()
    answer = await sdk().chat.completions.create(model="m", messages=USER)
    assert time.monotonic() - started >= 0.2
    assert answer.choices[0].message.content == "late"


async def test_slow_reply_beyond_client_timeout(
    fake_upstream: FakeUpstream, sdk: SdkFactory
) -> None:
    fake_upstream.enqueue(slow_reply(5.0))
    with pytest.raises(openai.APITimeoutError):
        await sdk(timeout=0.2).chat.completions.create(model="m", messages=USER)
    await fake_upstream.wait_idle()
    assert fake_upstream.cancelled == 1


async def test_never_reply_times_out_and_counts_cancelled(
    fake_upstream: FakeUpstream, sdk: SdkFactory
) -> None:
    fake_upstream.enqueue(never_reply())
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):  # the client's timeout, not the 30 s hang bound
        call = sdk(timeout=0.3).chat.completions.create(model="m", messages=USER)
        await asyncio.wait_for(call, 30)

    assert time.monotonic() - started >= 0.25  # it waited for its timeout: never answered
    await fake_upstream.wait_idle()
    assert (fake_upstream.cancelled, fake_upstream.completed) == (1, 0)
    assert fake_upstream.active_requests == 0
    assert fake_upstream.last.json()["messages"] == USER  # recorded before the reply hung


async def test_wait_idle_reports_a_hanging_handler(fake_upstream: FakeUpstream) -> None:
    fake_upstream.enqueue(never_reply())
    async with aiohttp.ClientSession() as session:
        request = asyncio.create_task(session.post(fake_upstream.base_url + "/chat/completions"))
        await fake_upstream.wait_for_requests(1)
        assert fake_upstream.active_requests == 1
        with pytest.raises(TimeoutError, match="active=1"):
            await fake_upstream.wait_idle(0.1)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
    await fake_upstream.wait_idle()
    assert fake_upstream.cancelled == 1


async def test_client_leaving_mid_stream_counts_cancelled(fake_upstream: FakeUpstream) -> None:
    fake_upstream.enqueue(sse_reply([{"n": n} for n in range(200)], delay_s=0.01))
    async with aiohttp.ClientSession() as session:
        response = await session.post(fake_upstream.base_url + "/chat/completions")
        first = await response.content.readline()
        response.close()
    assert first == b'data: {"n":0}\n'
    await fake_upstream.wait_idle()
    assert (fake_upstream.cancelled, fake_upstream.completed) == (1, 0)
    assert fake_upstream.errors == []


# -- recording, routing and scripting ---------------------------------------------------------


async def test_records_exact_body_bytes_query_and_headers(fake_upstream: FakeUpstream) -> None:
    raw = (
        b'{ "model" : "m",\n "messages": [], '
        b'"big": 123456789012345678901234567890, "u": "\xc3\xa9" }'
    )
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            fake_upstream.base_url + "/chat/completions?api-version=2024-10-21&x=1",
            data=raw,
            headers={"Content-Type": "application/json", "X-Tenant": "acme"},
        ) as response,
    ):
        assert response.status == 200

    record = fake_upstream.last
    assert record.body == raw
    assert record.query == "api-version=2024-10-21&x=1"
    assert record.headers["x-tenant"] == "acme"
    assert record.json()["big"] == 123456789012345678901234567890
    assert record.json()["u"] == "é"


async def test_models_list_and_catch_all(fake_upstream: FakeUpstream, sdk: SdkFactory) -> None:
    models = [m.id async for m in sdk().models.list()]
    async with (
        aiohttp.ClientSession() as session,
        session.delete(
            fake_upstream.base_url + "/files/file-1?purge=true", data=b"12345"
        ) as response,
    ):
        echoed = await response.json()
        assert response.status == 200
    async with aiohttp.ClientSession() as session, session.get(fake_upstream.origin + "/x") as r:
        assert r.status == 404

    assert "gpt-4o" in models and "gpt-4o-mini" in models
    assert echoed == {
        "object": "fake.echo",
        "method": "DELETE",
        "path": "/v1/files/file-1",
        "query": "purge=true",
        "body_length": 5,
    }
    assert [(r.method, r.path) for r in fake_upstream.received] == [
        ("GET", "/v1/models"),
        ("DELETE", "/v1/files/file-1"),
        ("GET", "/x"),
    ]


async def test_queue_is_fifo_and_can_target_a_path(
    fake_upstream: FakeUpstream, sdk: SdkFactory
) -> None:
    fake_upstream.enqueue(json_reply({"object": "list", "data": []}), path="/v1/models")
    fake_upstream.enqueue_many(completion("first"), completion("second"))
    client = sdk()

    contents = [
        (await client.chat.completions.create(model="m", messages=USER)).choices[0].message.content
        for _ in range(3)
    ]
    models = [m async for m in client.models.list()]

    assert contents == ["first", "second", "echo: " + str(USER[0]["content"])[:50]]
    assert models == []
    assert fake_upstream.pending == 0
    assert len(fake_upstream.requests("/v1/chat/completions")) == 3


async def test_dynamic_reply_sees_the_request(fake_upstream: FakeUpstream, sdk: SdkFactory) -> None:
    def choose(record: Recorded) -> Reply:
        return completion(f"{len(record.json()['messages'])} messages")

    fake_upstream.enqueue(dynamic_reply(choose))
    answer = await sdk().chat.completions.create(model="m", messages=USER * 3)
    assert answer.choices[0].message.content == "3 messages"


async def test_a_default_script_answers_every_request_the_queue_does_not() -> None:
    def script(record: Recorded) -> Reply:
        return completion(f"scripted {record.headers.get('x-case', '-')}")

    async with FakeUpstream(default=script) as fake:
        fake.enqueue(completion("queued"))
        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
        contents = [
            (
                await client.chat.completions.create(
                    model="m", messages=USER, extra_headers={"x-case": str(n)}
                )
            )
            .choices[0]
            .message.content
            for n in range(3)
        ]
        await client.close()
    assert contents == ["queued", "scripted 1", "scripted 2"]


def test_wire_file_prefers_shared_copy_and_vendored_copy_matches(
    parallel_tool_calls_sse: Path,
) -> None:
    vendored = VENDORED_WIRE_DIR / parallel_tool_calls_sse.name
    assert vendored.is_file()
    if (SHARED_WIRE_DIR / parallel_tool_calls_sse.name).is_file():
        assert parallel_tool_calls_sse.parent == SHARED_WIRE_DIR
        assert vendored.read_bytes() == parallel_tool_calls_sse.read_bytes()
    else:
        assert parallel_tool_calls_sse == vendored
