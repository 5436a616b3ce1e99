"""bench/tools: the ranking's hit rate as RESULTS.md states it, and the tokens table."""

from __future__ import annotations

from bench.tools.ranking import hit_rates
from bench.tools.tokens import table


def test_the_hit_rates_are_what_results_md_reports() -> None:
    top1, top3, pairs, misses = hit_rates()
    assert (top1, top3, pairs) == (61, 63, 70)
    assert len(misses) == pairs - top3
    assert all(expected not in ranked for _, expected, ranked in misses)


def test_the_tokens_table_marks_requests_that_fit() -> None:
    rows = [
        {"format": "f", "tools": 20, "request_before": 1658, "request_after": 1658,
         "tools_before": None, "tools_after": None, "sent": 20},
        {"format": "f", "tools": 120, "request_before": 7094, "request_after": 983,
         "tools_before": 7078, "tools_after": 967, "sent": 15},
    ]  # fmt: skip
    lines = table(rows).splitlines()
    assert lines[2] == "| f | 20 | 1,658 | 1,658 | (fits) | (as sent) | 20 |"
    assert lines[3] == "| f | 120 | 7,094 | 983 | 7078 | 967 | 15 |"
