"""`completion.usage_tap`: each answer's usage read from stream bytes as they pass."""

from __future__ import annotations

from proxy.completion.usage_tap import UsageTap
from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_responses import OPENAI_RESPONSES
from proxy.stats import RequestStats
from proxy.tokens.usage import TokenUsage

START = (
    b"event: message_start\n"
    b'data: {"message":{"usage":{"input_tokens":5,"cache_read_input_tokens":1234,'
    b'"cache_creation_input_tokens":0,"output_tokens":1}}}\n\n'
)
DELTA = b'event: message_delta\ndata: {"usage":{"output_tokens":17}}\n\n'


def test_a_number_split_between_chunks_is_found() -> None:
    stats = RequestStats()
    tap = UsageTap(ANTHROPIC_MESSAGES, stats)
    cut = START.index(b"1234") + 2
    tap(START[:cut])
    tap(START[cut:])
    assert stats.cached_tokens == 1234
    assert stats.answers == [TokenUsage(1239, 1, 1234, 0)]


def test_the_last_statement_of_a_figure_wins_within_a_round() -> None:
    stats = RequestStats()
    tap = UsageTap(ANTHROPIC_MESSAGES, stats)
    tap(START)
    tap(DELTA)
    assert stats.answers == [TokenUsage(1239, 17, 1234, 0)]


def test_rounds_are_answers_of_their_own_and_add_up() -> None:
    stats = RequestStats()
    tap = UsageTap(ANTHROPIC_MESSAGES, stats)
    tap.next_round()
    tap(START)
    tap(b'data: {"usage":{"cache_read_input_tokens":1234}}\n\n')  # message_delta repeats it
    tap.next_round()
    tap(START.replace(b"1234", b"100"))
    assert stats.cached_tokens == 1334
    assert len(stats.answers) == 2
    assert stats.usage == TokenUsage(1239 + 105, 2, 1334, 0)


def test_nothing_stated_leaves_the_stats_alone() -> None:
    stats = RequestStats()
    tap = UsageTap(OPENAI_CHAT, stats)
    tap(b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n')
    assert stats.cached_tokens is None and stats.answers == []
    tap(b'data: {"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":8}}}\n\n')
    assert stats.cached_tokens == 8
    assert stats.answers == [TokenUsage(9, 0, 8)]


def test_a_figure_without_the_prompt_is_no_usage_yet() -> None:
    stats = RequestStats()
    tap = UsageTap(OPENAI_RESPONSES, stats)
    tap(b'data: {"output_tokens":3}\n\n')
    assert stats.answers == []
    tap(b'data: {"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":0}}}\n\n')
    assert stats.answers == [TokenUsage(40, 3, 0)]


def test_usage_keys_inside_a_models_text_are_not_read() -> None:
    stats = RequestStats()
    tap = UsageTap(OPENAI_CHAT, stats)
    tap(b'data: {"choices":[{"delta":{"content":"{\\"prompt_tokens\\": 99}"}}]}\n\n')
    assert stats.answers == []


def test_any_chunking_gives_the_same_usage() -> None:
    stream = START + b'event: content_block_delta\ndata: {"delta":{"text":"hi"}}\n\n' + DELTA
    expected = TokenUsage(1239, 17, 1234, 0)
    for size in (1, 2, 3, 7, 16, 63, 64, 65, len(stream)):
        stats = RequestStats()
        tap = UsageTap(ANTHROPIC_MESSAGES, stats)
        for at in range(0, len(stream), size):
            tap(stream[at : at + size])
        assert stats.answers == [expected], size
