"""Overflow answers: recognised by their shape, and the window they state."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.upstream.overflow import is_overflow, stated_prompt_tokens, stated_window


def body(payload: Any) -> bytes:
    return json.dumps(payload).encode()


OPENAI = body(
    {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
)
VLLM = body(
    {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "5000 tokens (4000 in the messages, 1000 in the completion).",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
)
LLAMA_CPP = body(
    {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 2048,
        }
    }
)
LLAMA_CPP_OLD = body({"error": {"code": 400, "message": "prompt too long (n_ctx = 1024)"}})


@pytest.mark.parametrize(
    ("raw", "window"), [(OPENAI, 8192), (VLLM, 4096), (LLAMA_CPP, 2048), (LLAMA_CPP_OLD, 1024)]
)
def test_the_window_of_known_overflow_answers(raw: bytes, window: int) -> None:
    assert is_overflow(400, raw)
    assert stated_window(400, raw) == window


def test_an_overflow_without_a_number_states_no_window() -> None:
    raw = body({"error": {"message": "x", "code": "context_length_exceeded"}})
    assert is_overflow(400, raw) and stated_window(400, raw) is None
    assert stated_window(413, b"context size exceeded") is None


def test_other_errors_are_no_overflow_whatever_numbers_they_hold() -> None:
    assert not is_overflow(500, OPENAI)  # only a client error is an overflow
    assert stated_window(429, OPENAI) is None
    limit = body({"error": {"message": "max_tokens is 8192 at most", "code": "invalid_value"}})
    assert stated_window(400, limit) is None
    assert stated_window(400, b"not json at all") is None
    assert stated_window(400, body(["a list"])) is None
    assert stated_window(400, body({"error": "maximum context length is 77 tokens"})) == 77


def test_a_stated_window_must_be_positive() -> None:
    raw = body({"error": {"message": "maximum context length is 0 tokens", "n_ctx": True}})
    assert stated_window(400, raw) is None


def test_anthropics_prompt_too_long_states_its_maximum() -> None:
    body = json.dumps(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210234 tokens > 200000 maximum",
            },
        }
    ).encode()
    assert is_overflow(400, body)
    assert stated_window(400, body) == 200000


ANTHROPIC = body(
    {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    }
)


@pytest.mark.parametrize(
    ("raw", "tokens"),
    [(OPENAI, 9000), (VLLM, 4000), (LLAMA_CPP, 5000), (LLAMA_CPP_OLD, None), (ANTHROPIC, 210000)],
)
def test_the_prompt_size_an_overflow_answer_states(raw: bytes, tokens: int | None) -> None:
    """The prompt's own tokens (never the completion's, nor the window): what the retry uses
    to count the same conversation as the upstream does."""
    assert stated_prompt_tokens(400, raw) == tokens


def test_no_prompt_size_from_an_answer_that_is_no_overflow() -> None:
    assert stated_prompt_tokens(429, OPENAI) is None
    assert stated_prompt_tokens(400, body({"error": {"message": "(12 in the messages)"}})) is None
