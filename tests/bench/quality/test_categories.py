"""Smoke test of the probe evaluation by category (bench/quality/categories.py): every method
runs at every budget, evidence stays reachable, and the table has a row per method x budget."""

from __future__ import annotations

import pytest
from shared_tokens import shared_catalog, shared_counters

from bench.quality.categories import CATEGORIES, METHODS, evaluate, main, table
from bench.quality.categories_gen import build_all


async def test_every_method_keeps_every_category_reachable_and_the_request_inline() -> None:
    budgets = [900, 16_000]
    tallies = await evaluate(build_all(1), budgets, shared_counters(), shared_catalog())
    for preset in METHODS:
        for budget in budgets:
            tally = tallies[(preset, budget, "all")]
            assert tally.requests == 3 and tally.refused == 0
            for category in CATEGORIES:
                assert tally.reachable[category] == tally.total[category] > 0
            assert tally.inline["continuation"] == 3
    # a small budget leaves less inline than a large one
    small, large = tallies[("default", 900, "all")], tallies[("default", 16_000, "all")]
    assert sum(small.inline.values()) < sum(large.inline.values())
    rows = table(tallies, budgets).splitlines()
    assert len(rows) == 2 + len(METHODS) * len(budgets)
    assert rows[2].startswith("| window (default) | 900 |")


def test_the_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--budgets", "4000"]) == 0
    out = capsys.readouterr().out
    assert "| compact, scripted summary | 4,000 |" in out
