"""`upstream.litellm_adapter`: arguments for litellm, its errors as OpenAI answers, the lazy
import (end to end with a real provider: tests/e2e/test_e2e_litellm.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import litellm
import pytest
from multidict import CIMultiDict

from proxy.errors import ErrorCode
from proxy.settings import UpstreamSettings
from proxy.upstream.base import UpstreamError
from proxy.upstream.litellm_adapter import LitellmUpstream


def upstream(**settings: object) -> LitellmUpstream:
    data = {"name": "g", "kind": "litellm", "provider": "gemini", **settings}
    return LitellmUpstream(UpstreamSettings.model_validate(data), None)  # type: ignore[arg-type]


def test_arguments_name_the_provider_and_carry_the_key_and_base() -> None:
    request = {
        "model": "gemini-2.5-pro",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
        "temperature": 0.2,
    }
    arguments = upstream(base_url="http://127.0.0.1:9")._arguments(
        request, CIMultiDict({"Authorization": "Bearer sk-1"})
    )
    assert arguments["model"] == "gemini/gemini-2.5-pro"
    assert arguments["messages"] == request["messages"] and arguments["stream"] is True
    assert (arguments["api_base"], arguments["api_key"]) == ("http://127.0.0.1:9", "sk-1")
    assert arguments["temperature"] == 0.2 and arguments["num_retries"] == 0
    bare = upstream(api_key="operator")._arguments({"model": "m"}, CIMultiDict())
    assert "api_base" not in bare and bare["api_key"] == "operator"
    anthropic_key = upstream()._arguments({"model": "m"}, CIMultiDict({"x-api-key": "sk-a"}))
    assert anthropic_key["api_key"] == "sk-a"


async def test_a_context_window_error_is_context_length_exceeded() -> None:
    error = litellm.ContextWindowExceededError(
        "prompt is too long: 250000 tokens > 200000 maximum", "m", "anthropic"
    )
    answer = upstream()._error(error)
    body = json.loads(await answer.read())
    assert answer.status == 400 and body["error"]["code"] == "context_length_exceeded"
    assert "prompt is too long" in body["error"]["message"]


async def test_a_rate_limit_keeps_its_status() -> None:
    answer = upstream()._error(litellm.RateLimitError("slow down", "gemini", "m"))
    body = json.loads(await answer.read())
    assert answer.status == 429 and body["error"]["code"] == "rate_limit_exceeded"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (litellm.Timeout("late", "m", "gemini"), ErrorCode.upstream_timeout),
        (litellm.APIConnectionError("down", "gemini", "m"), ErrorCode.upstream_unavailable),
        (RuntimeError("odd"), ErrorCode.upstream_unavailable),
    ],
)
def test_transport_failures_are_upstream_errors(error: Exception, code: ErrorCode) -> None:
    with pytest.raises(UpstreamError) as raised:
        upstream()._error(error)
    assert raised.value.code is code


async def test_other_routes_are_not_served() -> None:
    answer = await upstream().open("GET", "/models", headers=CIMultiDict(), body=None)
    assert answer.status == 404


def test_litellm_is_imported_only_when_a_request_goes_there() -> None:
    code = textwrap.dedent(
        """
        import sys
        from proxy.app import create_app
        from proxy.settings import Settings
        settings = Settings.model_validate({"upstreams": [
            {"name": "g", "kind": "litellm", "provider": "gemini"}]})
        create_app(settings)
        print("litellm" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_errors_of_messages_clients_are_in_anthropics_envelope() -> None:
    error = litellm.ContextWindowExceededError("too many tokens for this model", "m", "openai")
    answer = upstream()._error(error, messages=True)
    body = json.loads(await answer.read())
    assert answer.status == 400
    assert body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: " + str(error.message),
        },
    }
    limited = upstream()._error(litellm.RateLimitError("slow", "openai", "m"), messages=True)
    assert json.loads(await limited.read())["error"]["type"] == "rate_limit_error"


def test_messages_arguments_keep_the_anthropic_fields() -> None:
    request = {
        "model": "qwen",
        "max_tokens": 5,
        "system": "s",
        "stream": False,
        "messages": [{"role": "user", "content": "x"}],
        "thinking": {"type": "disabled"},
    }
    arguments = upstream(
        provider="hosted_vllm", base_url="http://127.0.0.1:9/v1"
    )._messages_arguments(request, CIMultiDict({"x-api-key": "k"}))
    assert arguments["model"] == "hosted_vllm/qwen" and arguments["system"] == "s"
    assert arguments["thinking"] == {"type": "disabled"} and arguments["stream"] is False
    assert (arguments["api_base"], arguments["api_key"]) == ("http://127.0.0.1:9/v1", "k")
