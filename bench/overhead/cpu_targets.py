"""The targets of a lighter, faster process in the overhead run: RSS at rest, and the
passthrough's CPU per request against the reference forwarder's, cell by cell of one run."""

from __future__ import annotations

import math
from typing import Any

from bench.overhead.report import Results

CPU_TARGETS = {"2KB": 1.3, "1MB": 2.0}
"""Passthrough CPU per request, at most this many times the reference forwarder's."""
REST_MB = 80
"""RSS of a single OpenAI-model deployment at rest (started, no request yet)."""
PASSTHROUGHS = ("ctxproxy-pass", "ctxproxy-pass-asyncio")

Row = tuple[str, str, bool | None]


def cpu_ratio(res: Results, size: str, conc: int, name: str) -> float:
    """`name`'s CPU per request over the reference forwarder's in the same JSON cell."""
    mine, ref = res.cell("json", size, conc, name), res.cell("json", size, conc, "reference")
    if mine is None or ref is None:
        return math.nan
    ours, theirs = mine.get("cpu_us_per_request"), ref.get("cpu_us_per_request")
    return ours / theirs if theirs and not math.isnan(ours) else math.nan


def cpu_rows(res: Results) -> list[Row]:
    """One row per passthrough and size of `CPU_TARGETS`: the ratio in every concurrency cell;
    met when the worst cell is within the target."""
    rows: list[Row] = []
    for size, limit in CPU_TARGETS.items():
        concs = sorted({c.concurrency for c in res.cells if c.mode == "json" and c.size == size})
        for name in PASSTHROUGHS:
            ratios = [(c, cpu_ratio(res, size, c, name)) for c in concs]
            ratios = [(c, r) for c, r in ratios if not math.isnan(r)]
            if not ratios:
                continue
            worst = max(r for _, r in ratios)
            shown = ", ".join(f"c={c} {r:.2f}x" for c, r in ratios)
            rows.append(
                (
                    f"{name}: CPU per request <= {limit:g}x reference ({size}, every c)",
                    shown,
                    worst <= limit,
                )
            )
    return rows


def rest_rows(memory: dict[str, dict[str, Any]]) -> list[Row]:
    rows: list[Row] = []
    for name in PASSTHROUGHS:
        info = memory.get(name)
        if info is None or "rest_kb" not in info:
            continue
        rest, ref = info["rest_kb"] / 1024, memory.get("reference", {}).get("rest_kb", 0) / 1024
        rows.append(
            (
                f"{name}: RSS at rest < {REST_MB} MB (started, no request yet)",
                f"{rest:.0f} MB (reference forwarder {ref:.0f} MB; after the first requests "
                f"{info['start_kb'] / 1024:.0f} MB)",
                rest < REST_MB,
            )
        )
    return rows
