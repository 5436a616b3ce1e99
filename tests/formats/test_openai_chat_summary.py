"""formats/openai_chat/summary.py: the summarizer's request and what is read of its answer."""

from __future__ import annotations

from proxy.formats.openai_chat.summary import summary_answer, summary_request


def test_the_request_is_one_deterministic_non_streamed_call() -> None:
    assert summary_request("m", "do this", "the turns", 300) == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "do this"},
            {"role": "user", "content": "the turns"},
        ],
        "max_tokens": 300,
        "temperature": 0,
        "stream": False,
    }


def test_the_answer_is_the_first_choices_text_its_model_and_integer_usage() -> None:
    parts = {"role": "assistant", "content": [{"type": "text", "text": "a"},
                                              {"type": "text", "text": "b"}]}
    data = {"model": "m1", "choices": [{"message": parts}, {"message": {"content": "x"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "odd": 1.5, "flag": True}}
    assert summary_answer(data) == ("ab", "m1", {"prompt_tokens": 5, "completion_tokens": 2})
    assert summary_answer({"choices": [{"message": {"content": "t"}}]}) == ("t", "", {})
    for bad in (None, [], {"choices": []}, {"choices": [{"message": {"content": ""}}]},
                {"choices": [{"message": {"content": None}}]}, {"choices": ["x"]}):
        assert summary_answer(bad) is None
