"""formats/anthropic_messages/summary.py: the summarizer's call when its upstream speaks
Anthropic Messages."""

from __future__ import annotations

from proxy.formats.anthropic_messages.summary import summary_answer, summary_request


def test_the_request_puts_the_instructions_in_the_system_prompt() -> None:
    assert summary_request("claude-x", "Do this.", "The turns.", 300) == {
        "model": "claude-x",
        "system": "Do this.",
        "messages": [{"role": "user", "content": "The turns."}],
        "max_tokens": 300,
        "temperature": 0,
        "stream": False,
    }


def test_the_answer_is_its_text_blocks_with_usage_as_prompt_and_completion() -> None:
    data = {
        "model": "claude-x-2025",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": '{"facts": '},
            {"type": "text", "text": "[]}"},
        ],
        "usage": {"input_tokens": 100, "cache_read_input_tokens": 20,
                  "cache_creation_input_tokens": 5, "output_tokens": 7},
    }
    assert summary_answer(data) == (
        '{"facts": []}', "claude-x-2025", {"prompt_tokens": 125, "completion_tokens": 7}
    )


def test_an_answer_without_text_is_none_and_odd_fields_are_left_out() -> None:
    assert summary_answer({"content": [{"type": "thinking", "thinking": "x"}]}) is None
    assert summary_answer({"content": []}) is None
    assert summary_answer("text") is None
    assert summary_answer({"content": [{"type": "text", "text": "ok"}], "model": 3,
                           "usage": {"input_tokens": "9", "output_tokens": True}}) == ("ok", "", {})
    assert summary_answer({"content": [{"type": "text", "text": "ok"}], "usage": []}) == (
        "ok", "", {}
    )
