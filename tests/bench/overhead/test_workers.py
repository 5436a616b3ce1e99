"""The workers comparison's report: medians over rounds, the ratio and the target."""

from __future__ import annotations

from bench.overhead.workers import parse_args, render


def _cell(rps: float) -> dict[str, float]:
    return {"rps": rps, "errors": 0, "p50_ms": 1.0, "cpus": 1.0, "cpu_ms": 0.5}


def _cells(one: list[float], two: list[float]) -> dict[tuple[str, int], list[dict[str, float]]]:
    return {
        ("direct", 16): [_cell(9000)] * 3,
        ("workers=1", 16): [_cell(r) for r in one],
        ("workers=2", 16): [_cell(r) for r in two],
    }


def test_the_target_is_met_on_the_ratio_of_medians() -> None:
    args = parse_args(["--concurrency", "16"])
    text, met = render(args, _cells([100, 1000, 110], [190, 10, 200]), {}, "cmd")
    assert met and "**met** (1.73x at c=16)" in text  # medians 110 and 190
    assert "| 16 | workers=2 | 190 | 190, 10, 200 |" in text


def test_the_target_is_missed_below_the_ratio() -> None:
    args = parse_args(["--concurrency", "16"])
    text, met = render(args, _cells([100, 100, 100], [160, 169, 150]), {}, "cmd")
    assert not met and "**missed** (1.60x at c=16)" in text
