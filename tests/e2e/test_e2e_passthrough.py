"""Foundation: the proxy is invisible when nothing needs to change."""

from __future__ import annotations

import asyncio

import aiohttp
import openai
import pytest
from aiohttp import web
from fakes import FakeUpstream, json_reply, never_reply, replay_file, stream_completion
from multidict import CIMultiDict
from proxy_harness import RunningProxy

BODY = (
    b'{"model":"gpt-4o","x_unknown":{"b":1,"a":[1.50,2]},'
    b'"messages":[{"role":"user","content":"hi there","x_extra":true}]}'
)


async def post(
    url: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, CIMultiDict[str], bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url, data=body, headers={"Content-Type": "application/json", **(headers or {})}
        ) as response,
    ):
        return response.status, CIMultiDict(response.headers), await response.read()


async def test_upstream_receives_original_bytes(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    status, headers, _ = await post(
        f"{proxy.base_url}/chat/completions", BODY, {"Authorization": "Bearer sk-client"}
    )
    assert status == 200
    assert fake_upstream.last.body == BODY
    assert fake_upstream.last.headers["Authorization"] == "Bearer sk-client"
    assert headers["x-ctxproxy-policy"] == "default"
    assert headers["x-ctxproxy-actions"] == "none"
    assert int(headers["x-ctxproxy-tokens-before"]) > 0


async def test_sdk_sees_same_answer_as_direct(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    messages = [{"role": "user", "content": "same answer please"}]
    async with (
        openai.AsyncOpenAI(base_url=fake_upstream.base_url, api_key="k", max_retries=0) as direct,
        openai.AsyncOpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as via,
    ):
        a = await direct.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
        b = await via.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    assert a.model_dump() == b.model_dump()
    assert fake_upstream.received[0].body == fake_upstream.received[1].body


async def test_stream_events_arrive_unchanged(
    proxy: RunningProxy, fake_upstream: FakeUpstream, parallel_tool_calls_sse: object
) -> None:
    fake_upstream.enqueue(replay_file(parallel_tool_calls_sse, chunk_size=97))  # type: ignore[arg-type]
    body = b'{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"weather"}]}'
    status, headers, data = await post(f"{proxy.base_url}/chat/completions", body)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    assert data == parallel_tool_calls_sse.read_bytes()  # type: ignore[attr-defined]


async def test_sdk_streaming_through_proxy(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.enqueue(stream_completion(["Hel", "lo", "!"], include_usage=True))
    text, usage = "", None
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            usage = chunk.usage or usage
    assert text == "Hello!"
    assert usage is not None and usage.total_tokens > 0


@pytest.mark.parametrize("status", [400, 429, 500, 503])
async def test_upstream_errors_pass_through(
    proxy: RunningProxy, fake_upstream: FakeUpstream, status: int
) -> None:
    error = b'{"error": {"message": "nope",  "code": "x"}}'
    fake_upstream.enqueue(json_reply(error, status=status, headers={"retry-after": "7"}))
    got, headers, data = await post(f"{proxy.base_url}/chat/completions", BODY)
    assert got == status
    assert data == error
    assert headers["retry-after"] == "7"


async def test_sync_sdk(proxy: RunningProxy) -> None:
    def call() -> str:
        with openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
            reply = client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "sync hello"}]
            )
        return reply.choices[0].message.content or ""

    assert (await asyncio.to_thread(call)) == "echo: sync hello"


async def test_models_and_other_routes_forwarded(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
        models = await client.models.list()
    assert len(models.data) > 0
    async with (
        aiohttp.ClientSession() as session,
        session.delete(f"{proxy.base_url}/files/file-1?purpose=x") as response,
    ):
        assert response.status == 200
        body = await response.json()
    assert body["method"] == "DELETE" and body["query"] == "purpose=x"
    assert fake_upstream.last.path == "/v1/files/file-1"


async def test_client_disconnect_frees_upstream(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.enqueue(never_reply())

    async def call() -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{proxy.base_url}/chat/completions",
                data=BODY,
                headers={"Content-Type": "application/json"},
            ),
        ):
            pass

    client = asyncio.create_task(call())
    await fake_upstream.wait_for_requests(1)
    client.cancel()
    with pytest.raises(asyncio.CancelledError):
        await client
    await fake_upstream.wait_idle()
    assert fake_upstream.cancelled == 1


async def test_client_disconnect_mid_stream_frees_upstream(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.enqueue(stream_completion([f"w{i} " for i in range(200)], delay_s=0.02))
    body = b'{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"x"}]}'
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{proxy.base_url}/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        ) as response,
    ):
        await response.content.readany()
    await fake_upstream.wait_idle()
    assert fake_upstream.cancelled == 1


async def test_expect_100_continue_is_not_forwarded(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    """curl sends `Expect: 100-continue` for large bodies; the proxy has the body already."""
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.post(
            f"{proxy.base_url}/chat/completions",
            data=BODY,
            expect100=True,
            headers={"Content-Type": "application/json"},
        ) as response,
    ):
        assert response.status == 200
    assert "Expect" not in fake_upstream.last.headers
    assert fake_upstream.last.body == BODY


class _GatedBody:
    """A large non-SSE body: `first` bytes, then the rest only once `gate` is set."""

    def __init__(self, first: int, rest: int, content_type: str) -> None:
        self.first, self.rest, self.content_type = first, rest, content_type
        self.gate = asyncio.Event()

    async def respond(self, request: web.Request, record: object) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": self.content_type})
        response.content_length = self.first + self.rest
        await response.prepare(request)
        await response.write(b"a" * self.first)
        await self.gate.wait()
        await response.write(b"b" * self.rest)
        await response.write_eof()
        return response


@pytest.mark.parametrize(
    ("method", "path", "content_type"),
    [
        ("GET", "/files/file-1/content", "application/octet-stream"),
        ("POST", "/chat/completions", "application/json"),
    ],
)
async def test_a_large_answer_reaches_the_client_before_it_has_all_arrived(
    proxy: RunningProxy, fake_upstream: FakeUpstream, method: str, path: str, content_type: str
) -> None:
    # Issue 11 item 5: non-streaming answers were read whole before the first byte went out.
    gated = _GatedBody(2 * 1024 * 1024, 1024 * 1024, content_type)
    fake_upstream.enqueue(gated)
    data = BODY if method == "POST" else None
    headers = {"Content-Type": "application/json"} if data else {}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, f"{proxy.base_url}{path}", data=data, headers=headers) as response,
    ):
        assert response.status == 200
        first = await asyncio.wait_for(response.content.readexactly(2 * 1024 * 1024), 30)
        gated.gate.set()
        rest = await response.read()
    assert first == b"a" * 2 * 1024 * 1024 and rest == b"b" * 1024 * 1024
