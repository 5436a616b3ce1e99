"""The `litellm` upstream kind, through the real litellm against the fake OpenAI-wire upstream
(litellm's `openai` provider with `api_base`): answers, streams and errors in the OpenAI format."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import orjson
import pytest
from fakes import FakeUpstream, completion, error_reply, reset_reply, stream_completion
from multidict import CIMultiDict

from proxy.errors import ErrorCode
from proxy.settings import UpstreamSettings
from proxy.upstream.base import UpstreamError
from proxy.upstream.litellm_adapter import LitellmUpstream, import_litellm

CHAT = "/v1/chat/completions"


def upstream(base_url: str, **extra: object) -> LitellmUpstream:
    settings = UpstreamSettings.model_validate(
        {"name": "via-litellm", "kind": "litellm", "provider": "openai", "base_url": base_url}
        | extra
    )
    return LitellmUpstream(settings)


def request(**extra: object) -> bytes:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], **extra}
    return orjson.dumps(body)


def bearer(key: str = "sk-tenant") -> CIMultiDict[str]:
    return CIMultiDict({"Authorization": f"Bearer {key}"})


async def test_a_json_answer_comes_back_in_the_openai_format(fake_upstream: FakeUpstream) -> None:
    fake_upstream.enqueue(completion("from the provider"), path=CHAT)
    answer = await upstream(fake_upstream.base_url).send(
        headers=bearer(), body=request(temperature=0.5)
    )
    assert answer.status == 200 and answer.headers["Content-Type"] == "application/json"
    payload = orjson.loads(await answer.read())
    assert payload["object"] == "chat.completion"
    assert payload["choices"][0]["message"]["content"] == "from the provider"
    assert payload["usage"]["prompt_tokens"] > 0
    sent = fake_upstream.last
    assert sent.headers["Authorization"] == "Bearer sk-tenant"  # the tenant's credential
    assert sent.json()["model"] == "gpt-4o" and sent.json()["temperature"] == 0.5
    assert sent.json()["messages"] == [{"role": "user", "content": "hi"}]


async def test_a_stream_is_translated_chunk_by_chunk_and_ends_with_done(
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.enqueue(stream_completion(["Hel", "lo", "!"]), path=CHAT)
    answer = await upstream(fake_upstream.base_url).send(
        headers=bearer(), body=request(stream=True)
    )
    assert answer.is_event_stream
    chunks = [chunk async for chunk in answer.chunks()]
    assert chunks[-1] == b"data: [DONE]\n\n"
    events = [orjson.loads(c.removeprefix(b"data: ")) for c in chunks[:-1]]
    assert all(c.startswith(b"data: ") and c.endswith(b"\n\n") for c in chunks)
    assert {e["object"] for e in events} == {"chat.completion.chunk"}
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert text == "Hello!"
    assert fake_upstream.last.json()["stream"] is True


async def test_tool_calls_pass_both_ways(fake_upstream: FakeUpstream) -> None:
    call = {"id": "call_1", "name": "lookup", "arguments": '{"q": "x"}'}
    fake_upstream.enqueue(completion(None, tool_calls=[call]), path=CHAT)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    answer = await upstream(fake_upstream.base_url).send(
        headers=bearer(), body=request(tools=tools)
    )
    [call] = orjson.loads(await answer.read())["choices"][0]["message"]["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("call_1", "lookup")
    assert orjson.loads(call["function"]["arguments"]) == {"q": "x"}
    assert fake_upstream.last.json()["tools"][0]["function"]["name"] == "lookup"


async def test_a_context_window_error_reaches_the_client_as_context_length_exceeded(
    fake_upstream: FakeUpstream,
) -> None:
    overflow = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9000 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    fake_upstream.enqueue(error_reply(400, overflow), path=CHAT)
    answer = await upstream(fake_upstream.base_url, timeouts={"total_s": 5}).send(
        headers=bearer(), body=request()
    )
    error = orjson.loads(await answer.read())["error"]
    assert answer.status == 400
    assert error["code"] == "context_length_exceeded" and error["type"] == "invalid_request_error"
    assert "maximum context length is 8192 tokens" in error["message"]


async def test_a_provider_error_keeps_its_status_in_the_openai_envelope(
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.enqueue(error_reply(401), path=CHAT)
    answer = await upstream(fake_upstream.base_url).send(
        headers=bearer(), body=request()
    )
    assert answer.status == 401
    assert orjson.loads(await answer.read())["error"]["type"] == "authentication_error"


async def test_an_unreachable_provider_is_an_upstream_error() -> None:
    down = upstream("http://127.0.0.1:1/v1", timeouts={"total_s": 5})
    with pytest.raises(UpstreamError) as raised:
        await down.send(headers=bearer(), body=request())
    assert raised.value.code is ErrorCode.upstream_unavailable


async def test_other_routes_are_not_served() -> None:
    answer = await upstream("http://127.0.0.1:1/v1").open(
        "GET", "/models", headers=CIMultiDict(), body=None
    )
    assert answer.status == 404
    assert orjson.loads(await answer.read())["error"]["type"] == "not_found_error"
    responses = await upstream("http://127.0.0.1:1/v1").send(
        headers=bearer(), body=request(), route="/responses"
    )
    assert responses.status == 404  # another format's completions are not translated
    assert "POST /responses" in orjson.loads(await responses.read())["error"]["message"]


def test_the_model_gets_the_providers_prefix_and_the_key_comes_from_the_edge() -> None:
    gemini = UpstreamSettings.model_validate(
        {"name": "g", "kind": "litellm", "provider": "gemini", "api_key": "sk-upstream"}
    )
    args = LitellmUpstream(gemini).arguments({"model": "gemini-2.0-flash"}, CIMultiDict())
    assert args["model"] == "gemini/gemini-2.0-flash" and args["api_key"] == "sk-upstream"
    assert "api_base" not in args and args["drop_params"] is True
    again = LitellmUpstream(gemini).arguments({"model": "gemini/x"}, bearer("sk-client"))
    assert again["model"] == "gemini/x" and again["api_key"] == "sk-client"


def test_an_upstream_without_base_url_must_be_litellm() -> None:
    with pytest.raises(ValueError, match="base_url: required for an upstream of kind 'openai'"):
        UpstreamSettings.model_validate({"name": "o"})


def test_litellm_is_imported_only_by_a_call() -> None:
    script = textwrap.dedent(
        """
        import sys
        import proxy.app, proxy.cli
        from proxy.settings import UpstreamSettings
        from proxy.upstream import UPSTREAM_KINDS
        settings = UpstreamSettings(name="l", kind="litellm", provider="anthropic")
        UPSTREAM_KINDS["litellm"](settings, None)
        assert "litellm" not in sys.modules, "litellm was imported"
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


async def test_a_stream_that_fails_before_its_first_chunk_is_a_failed_call(
    fake_upstream: FakeUpstream,
) -> None:
    """Not a 200 and an error event (litellm raises MidStreamFallbackError at the first chunk
    of a stream whose connection broke before its headers): an `UpstreamError`, which the edge
    answers 502 like the same call without streaming, so the access line and metrics see it."""
    for _ in range(5):  # litellm's client tries again
        fake_upstream.enqueue(reset_reply(0), path=CHAT)
    down = upstream(fake_upstream.base_url, timeouts={"total_s": 5})
    with pytest.raises(UpstreamError) as raised:
        await down.send(headers=bearer(), body=request(stream=True))
    assert raised.value.code is ErrorCode.upstream_unavailable


@pytest.mark.parametrize("status", [401, 500])
async def test_a_stream_refused_at_once_is_an_error_answer(
    fake_upstream: FakeUpstream, status: int
) -> None:
    """The same status a whole answer gets."""
    for _ in range(5):  # litellm's client tries a 500 again
        fake_upstream.enqueue(error_reply(status), path=CHAT)
    answer = await upstream(fake_upstream.base_url, timeouts={"total_s": 5}).send(
        headers=bearer(), body=request(stream=True)
    )
    assert answer.status == status and not answer.is_event_stream
    assert orjson.loads(await answer.read())["error"]["message"]


def test_litellms_logging_goes_through_ours_and_its_banners_are_off() -> None:
    litellm = import_litellm()
    for name in ("LiteLLM", "LiteLLM Proxy", "LiteLLM Router"):
        logger = logging.getLogger(name)
        assert logger.handlers == [] and logger.propagate and logger.level == logging.WARNING
    assert litellm.suppress_debug_info is True
