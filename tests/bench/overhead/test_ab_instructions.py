"""The instruction A/B reads the callgrind totals of one server (its output may come in parts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.overhead.ab_instructions import _total_instructions, main


def test_the_total_is_the_largest_figure_over_the_output_parts(tmp_path: Path) -> None:
    out = tmp_path / "callgrind.1.out"
    out.write_text("events: Ir\nsummary: 1200\nfn=x\n1 5\ntotals: 1200\n")
    (tmp_path / "callgrind.1.out.2").write_text("events: Ir\ntotals: 9000\n")
    (tmp_path / "callgrind.2.out").write_text("totals: 99999999\n")  # another server's
    assert _total_instructions(out) == 9000


def test_unknown_body_sizes_are_refused_before_anything_starts() -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--a", "/nowhere", "--b", "/nowhere", "--sizes", "3KB"])
    assert stopped.value.code == 2
