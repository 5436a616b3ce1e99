"""`upstream.litellm_adapter` for Anthropic Messages clients: the Messages arguments and errors in
Anthropic's envelope (end to end: tests/e2e/test_e2e_litellm_anthropic.py)."""

from __future__ import annotations

import json

from multidict import CIMultiDict

from proxy.settings import UpstreamSettings
from proxy.upstream.litellm_adapter import (
    LitellmUpstream,
    anthropic_error_response,
    import_litellm,
)

litellm = import_litellm()  # as the adapter imports it: no fetch of the model map at import


def upstream(**settings: object) -> LitellmUpstream:
    data = {"name": "l", "kind": "litellm", "provider": "hosted_vllm", **settings}
    return LitellmUpstream(UpstreamSettings.model_validate(data))


def test_messages_arguments_keep_the_anthropic_fields() -> None:
    request = {
        "model": "qwen",
        "max_tokens": 5,
        "system": "s",
        "stream": False,
        "messages": [{"role": "user", "content": "x"}],
        "thinking": {"type": "disabled"},
    }
    arguments = upstream(base_url="http://127.0.0.1:9/v1").messages_arguments(
        request, CIMultiDict({"x-api-key": "k"})
    )
    assert arguments["model"] == "hosted_vllm/qwen" and arguments["system"] == "s"
    assert arguments["thinking"] == {"type": "disabled"} and arguments["stream"] is False
    assert (arguments["api_base"], arguments["api_key"]) == ("http://127.0.0.1:9/v1", "k")
    assert "drop_params" not in arguments


async def test_errors_of_messages_clients_are_in_anthropics_envelope() -> None:
    error = litellm.ContextWindowExceededError("too many tokens for this model", "m", "openai")
    answer = anthropic_error_response(litellm, error)
    body = json.loads(await answer.read())
    assert answer.status == 400
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long: ")
    limited = anthropic_error_response(litellm, litellm.RateLimitError("slow", "openai", "m"))
    assert limited.status == 429
    assert json.loads(await limited.read())["error"]["type"] == "rate_limit_error"
