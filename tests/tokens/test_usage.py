"""`tokens.usage`: an answer's usage in neutral terms, summed over answers."""

from __future__ import annotations

from proxy.tokens.usage import MAX_REPORTED_TOKENS, TokenUsage, reported, total_usage


def test_plausible_counts_only() -> None:
    assert reported(0) == 0 and reported(12) == 12 and reported(MAX_REPORTED_TOKENS) is not None
    for bad in (-1, True, 1.5, "3", None, MAX_REPORTED_TOKENS + 1):
        assert reported(bad) is None


def test_sums_keep_what_no_answer_said_unsaid() -> None:
    a = TokenUsage(100, 5, 80)
    b = TokenUsage(50, 2, None, 10)
    assert a + b == TokenUsage(150, 7, 80, 10)
    assert TokenUsage(1) + TokenUsage(2) == TokenUsage(3, 0, None, None)
    assert total_usage([]) is None
    assert total_usage([a, b, TokenUsage(1)]) == TokenUsage(151, 7, 80, 10)


def test_the_uncached_part() -> None:
    assert TokenUsage(100, 0, 30, 20).uncached == 50
    assert TokenUsage(100).uncached == 100
    assert TokenUsage(10, 0, 30).uncached == 0  # an upstream that over-reports its cache
