"""`formats.anthropic_messages.usage` and `.errors`: usage summed, Anthropic's error envelope."""

from __future__ import annotations

import json

from proxy.errors import ErrorCode, ProxyError
from proxy.formats.anthropic_messages import errors, usage
from proxy.formats.anthropic_messages.cache_marks import count_marks
from proxy.tokens.usage import TokenUsage


def test_usage_sums_and_prompt_tokens_include_the_cache() -> None:
    first = {
        "input_tokens": 10,
        "output_tokens": 2,
        "cache_read_input_tokens": 100,
        "service_tier": "standard",
    }
    total = usage.add_usage(usage.add_usage(None, first), {"input_tokens": 5, "output_tokens": 1})
    assert total == {
        "input_tokens": 15,
        "output_tokens": 3,
        "cache_read_input_tokens": 100,
        "service_tier": "standard",
    }
    assert usage.prompt_tokens(first) == 110
    assert usage.prompt_tokens({"output_tokens": 1}) is None
    assert usage.cached_tokens(first) == 100


def refusal() -> ProxyError:
    details = {"final_tokens": 9000, "refusal_limit_tokens": 5000, "reason": "x"}
    return ProxyError(
        ErrorCode.context_length_exceeded,
        "This model's maximum context ...",
        param="messages",
        details=details,
    )


def test_a_refusal_reads_prompt_is_too_long() -> None:
    body = errors.error_body(refusal(), "req1")
    assert body["type"] == "error" and body["request_id"] == "req1"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"] == "prompt is too long: 9000 tokens > 5000 maximum"
    details = body["error"]["ctxproxy"]
    assert details["code"] == "context_length_exceeded" and details["final_tokens"] == 9000
    assert details["explanation"].startswith("This model's maximum context")


def test_error_types_follow_the_status() -> None:
    auth = errors.error_body(ProxyError(ErrorCode.invalid_api_key, "no"), None)
    assert auth["error"] == {
        "type": "authentication_error",
        "message": "no",
        "ctxproxy": {"code": "invalid_api_key"},
    }
    assert errors.error_type(504) == "timeout_error" and errors.error_type(502) == "api_error"


def test_error_events() -> None:
    event = errors.error_event(refusal(), "r")
    assert event.startswith(b"event: error\ndata: ") and event.endswith(b"\n\n")
    upstream = json.dumps({"type": "error", "error": {"type": "overloaded_error"}}).encode()
    assert errors.upstream_error_event(upstream) is not None
    assert errors.upstream_error_event(b"not json") is None
    assert errors.relayed_error_event(refusal(), "r", b"event: x\ndata: {}\n\n") == event


def test_cache_marks_are_counted_everywhere() -> None:
    mark = {"cache_control": {"type": "ephemeral"}}
    body = {
        "tools": [{"name": "a", **mark}],
        "system": [{"type": "text", "text": "s", **mark}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "content": [{"type": "text", "text": "x", **mark}],
                        **mark,
                    }
                ],
            }
        ],
    }
    assert count_marks(body) == 4


def test_a_streams_usage_takes_the_last_statement_of_each_figure() -> None:
    scanner = usage.usage_scanner()
    assert scanner.usage() is None
    assert not scanner.feed(b'{"type":"ping"}')
    start = b'{"input_tokens": 3, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 2'
    assert scanner.feed(start + b', "output_tokens": 1}')
    assert scanner.feed(b'... {"cache_read_input_tokens":7, "output_tokens": 40}')
    assert scanner.usage() == TokenUsage(3 + 7 + 2, 40, 7, 2)
    huge = usage.usage_scanner()
    huge.feed(b'{"input_tokens": 1' + b"0" * 400 + b"}")  # no 12-digit prefix of it
    assert huge.usage() is None


def test_a_whole_usage_in_neutral_terms() -> None:
    whole = {
        "input_tokens": 10,
        "output_tokens": 2,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 30,
    }
    assert usage.token_usage(whole) == TokenUsage(140, 2, 100, 30)
    assert usage.token_usage({"input_tokens": 4}) == TokenUsage(4, 0, None, None)
    for bad in (None, [], {"output_tokens": 1}, {"input_tokens": -1}, {"input_tokens": True}):
        assert usage.token_usage(bad) is None
    assert usage.token_usage({"input_tokens": 1, "cache_read_input_tokens": "9"}) == TokenUsage(1)
