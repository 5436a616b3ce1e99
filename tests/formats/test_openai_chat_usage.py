"""`proxy.formats.openai_chat.usage`: usage summed over the rounds of one answer."""

from __future__ import annotations

from proxy.formats.common import add_usage
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.usage import answer_usage, with_usage
from proxy.tokens.usage import TokenUsage


def test_add_usage() -> None:
    a = {
        "prompt_tokens": 1,
        "completion_tokens": 2,
        "total_tokens": 3,
        "prompt_tokens_details": {"cached_tokens": 1, "audio_tokens": None},
    }
    b = {
        "prompt_tokens": 10,
        "completion_tokens": 20,
        "total_tokens": 30,
        "prompt_tokens_details": {"cached_tokens": 5, "audio_tokens": 2},
        "cost": None,
    }
    assert add_usage(None, None) is None
    total = add_usage(add_usage(None, a), b)
    assert total == {
        "prompt_tokens": 11,
        "completion_tokens": 22,
        "total_tokens": 33,
        "prompt_tokens_details": {"cached_tokens": 6, "audio_tokens": 2},
        "cost": None,
    }
    assert a["prompt_tokens"] == 1 and a["prompt_tokens_details"] == {  # inputs untouched
        "cached_tokens": 1,
        "audio_tokens": None,
    }


def test_an_answers_usage_is_read_and_replaced_in_place() -> None:
    payload = {"id": "c", "usage": {"total_tokens": 3}, "choices": []}
    assert answer_usage(payload) == {"total_tokens": 3}
    assert answer_usage({"choices": []}) is None
    with_usage(payload, {"total_tokens": 9})
    assert payload == {"id": "c", "usage": {"total_tokens": 9}, "choices": []}
    assert add_usage({"total_tokens": 1}, True) == {"total_tokens": 1}  # not a usage object
    assert add_usage({"n": True}, {"n": 2}) == {"n": 2}  # a boolean is no count


def test_add_usage_takes_non_integers_from_the_latest_round() -> None:
    assert add_usage({"note": "a", "n": 1}, {"note": "b", "tier": "x", "n": 2}) == {
        "note": "b",
        "n": 3,
        "tier": "x",
    }
    assert add_usage({"note": "a"}, {"note": None}) == {"note": "a"}  # None never overwrites
    assert add_usage({"cost": "n/a"}, {"cost": 3}) == {"cost": 3}  # not summed with a string
    assert add_usage({"details": 0}, {"details": {"x": 1}}) == {"details": {"x": 1}}


def test_prompt_tokens_of_a_usage() -> None:
    assert OPENAI_CHAT.prompt_tokens({"prompt_tokens": 1200, "completion_tokens": 3}) == 1200
    assert OPENAI_CHAT.prompt_tokens({"prompt_tokens": 0}) == 0
    for usage in (
        None,
        [],
        {},
        {"prompt_tokens": "12"},
        {"prompt_tokens": True},
        {"prompt_tokens": -1},
        {"prompt_tokens": 1.5},
    ):
        assert OPENAI_CHAT.prompt_tokens(usage) is None


def test_cached_tokens_come_from_the_prompt_details() -> None:
    from proxy.formats.openai_chat.usage import cached_tokens

    assert cached_tokens({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 6}}) == 6
    assert cached_tokens({"prompt_tokens": 10}) is None
    assert cached_tokens({"prompt_tokens_details": {"cached_tokens": 0}}) == 0  # a miss
    assert cached_tokens({"prompt_tokens_details": {"cached_tokens": -1}}) is None
    assert cached_tokens(None) is None


def test_a_streams_usage_takes_the_last_statement_of_each_figure() -> None:
    from proxy.formats.openai_chat.usage import usage_scanner

    scanner = usage_scanner()
    assert scanner.feed(b'"prompt_tokens_details":{"cached_tokens":12}')
    assert scanner.usage() is None  # no prompt tokens stated yet
    assert scanner.feed(b'"prompt_tokens":1300,"completion_tokens":7')
    assert scanner.usage() == TokenUsage(1300, 7, 12)
    assert not scanner.feed(b'"prompt_tokens_details":{"cached_tokens":1' + b"0" * 400)


def test_a_whole_usage_in_neutral_terms() -> None:
    from proxy.formats.openai_chat.usage import token_usage

    details = {"cached_tokens": 1024, "audio_tokens": 0}
    whole = {"prompt_tokens": 2000, "completion_tokens": 5, "prompt_tokens_details": details}
    assert token_usage(whole) == TokenUsage(2000, 5, 1024)
    assert token_usage({"prompt_tokens": 3}) == TokenUsage(3)
    assert token_usage({"prompt_tokens": 10**16}) is None  # implausible
    assert token_usage({"completion_tokens": 3}) is None
    assert token_usage(None) is None
