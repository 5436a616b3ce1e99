"""`formats.openai_responses.usage`: a Responses usage in neutral terms, whole or streamed."""

from __future__ import annotations

from proxy.formats.openai_responses import OPENAI_RESPONSES
from proxy.formats.openai_responses.usage import cached_tokens, token_usage, usage_scanner
from proxy.tokens.usage import TokenUsage


def test_a_whole_usage_in_neutral_terms() -> None:
    whole = {
        "input_tokens": 3000,
        "input_tokens_details": {"cached_tokens": 2048},
        "output_tokens": 40,
        "output_tokens_details": {"reasoning_tokens": 30},
        "total_tokens": 3040,
    }
    assert token_usage(whole) == TokenUsage(3000, 40, 2048)
    assert OPENAI_RESPONSES.token_usage(whole) == TokenUsage(3000, 40, 2048)
    assert cached_tokens(whole) == 2048
    assert token_usage({"input_tokens": 5}) == TokenUsage(5)
    for bad in (None, {"output_tokens": 3}, {"input_tokens": "5"}, {"input_tokens": -2}):
        assert token_usage(bad) is None


def test_the_completed_events_usage_is_read_from_stream_bytes() -> None:
    scanner = usage_scanner()
    assert not scanner.feed(b'event: response.created\ndata: {"response":{"usage":null}}\n\n')
    completed = (
        b'event: response.completed\ndata: {"response":{"max_output_tokens":9,'
        b'"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},'
        b'"output_tokens":12,"output_tokens_details":{"reasoning_tokens":0}}}}\n\n'
    )
    assert scanner.feed(completed)
    assert scanner.usage() == TokenUsage(1200, 12, 1024)
