"""`completion.usage_tap`: cached prompt tokens read from stream bytes as they pass."""

from __future__ import annotations

from proxy.completion.usage_tap import CachedTokensTap
from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.stats import RequestStats

START = (
    b"event: message_start\n"
    b'data: {"message":{"usage":{"input_tokens":5,"cache_read_input_tokens":1234}}}\n\n'
)


def test_a_number_split_between_chunks_is_found() -> None:
    stats = RequestStats()
    tap = CachedTokensTap(ANTHROPIC_MESSAGES, stats)
    cut = START.index(b"1234") + 2
    tap(START[:cut])
    tap(START[cut:])
    assert stats.cached_tokens == 1234


def test_rounds_add_up_and_a_repeat_within_a_round_counts_once() -> None:
    stats = RequestStats()
    tap = CachedTokensTap(ANTHROPIC_MESSAGES, stats)
    tap.next_round()
    tap(START)
    tap(b'data: {"usage":{"cache_read_input_tokens":1234}}\n\n')  # message_delta repeats it
    tap.next_round()
    tap(START.replace(b"1234", b"100"))
    assert stats.cached_tokens == 1334


def test_nothing_stated_leaves_the_stats_alone() -> None:
    stats = RequestStats()
    tap = CachedTokensTap(OPENAI_CHAT, stats)
    tap(b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n')
    assert stats.cached_tokens is None
    tap(b'data: {"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":8}}}\n\n')
    assert stats.cached_tokens == 8
