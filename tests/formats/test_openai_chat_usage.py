"""`proxy.formats.openai_chat.usage`: usage summed over the rounds of one answer."""

from __future__ import annotations

from proxy.formats.openai_chat.usage import add_usage


def test_add_usage() -> None:
    a = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3,
         "prompt_tokens_details": {"cached_tokens": 1, "audio_tokens": None}}
    b = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30,
         "prompt_tokens_details": {"cached_tokens": 5, "audio_tokens": 2}, "cost": None}
    assert add_usage(None, None) is None
    total = add_usage(add_usage(None, a), b)
    assert total == {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33,
                     "prompt_tokens_details": {"cached_tokens": 6, "audio_tokens": 2},
                     "cost": None}
    assert a["prompt_tokens"] == 1 and a["prompt_tokens_details"] == {  # inputs untouched
        "cached_tokens": 1, "audio_tokens": None}
