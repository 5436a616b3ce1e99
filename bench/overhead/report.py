"""Tables, targets and the "Overhead" section of bench/overhead/RESULTS.md for
bench/overhead/chat.py."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFIGS = {
    "direct": "direct to the mock",
    "reference": "bench/overhead/ref_forwarder.py (aiohttp, one pooled ClientSession)",
    "ctxproxy-pass": "ctxproxy, policy `inspect` (counts, changes nothing: original bytes), "
    "`server.event_loop: auto` (uvloop when installed)",
    "ctxproxy-pass-asyncio": "the same on asyncio's own event loop (`server.event_loop: asyncio`)",
    "ctxproxy-offload": (
        "ctxproxy, bench/overhead/policies/overhead-offload.yaml (offload + drop turns)"
    ),
    "litellm": "LiteLLM proxy (bench/overhead/litellm_config.yaml, 1 worker)",
}
SIZE_ORDER = ("2KB", "100KB", "1MB")
SHORT = {
    "direct": "direct",
    "reference": "ref",
    "ctxproxy-pass": "pass",
    "ctxproxy-pass-asyncio": "pass-asyncio",
    "ctxproxy-offload": "offload",
    "litellm": "litellm",
}


@dataclass
class Cell:
    mode: str  # "json" or "sse"
    size: str
    concurrency: int
    config: str
    result: dict[str, Any]

    def get(self, key: str) -> float:
        value = self.result.get(key)
        return float("nan") if value is None else float(value)


def _ms(us: float) -> str:
    if math.isnan(us):
        return "-"
    return f"{us / 1000:.2f}" if abs(us) < 100_000 else f"{us / 1000:.0f}"


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else float("nan")


def _fmt(x: float, digits: int = 2) -> str:
    return "-" if math.isnan(x) else f"{x:.{digits}f}"


class Results:
    def __init__(self, cells: list[Cell]) -> None:
        self.cells = cells
        self._by = {(c.mode, c.size, c.concurrency, c.config): c for c in cells}

    def cell(self, mode: str, size: str, conc: int, config: str) -> Cell | None:
        return self._by.get((mode, size, conc, config))

    def added(self, mode: str, size: str, conc: int, config: str, key: str) -> float:
        """`key` percentile of `config` minus the same percentile going direct, in us."""
        cell, direct = self.cell(mode, size, conc, config), self.cell(mode, size, conc, "direct")
        if cell is None or direct is None:
            return float("nan")
        return cell.get(key) - direct.get(key)

    def rows(self, mode: str) -> list[tuple[str, int]]:
        seen = {(c.size, c.concurrency) for c in self.cells if c.mode == mode}
        order = {size: i for i, size in enumerate(SIZE_ORDER)}
        return sorted(seen, key=lambda row: (order.get(row[0], 99), row[1]))

    def configs(self) -> list[str]:
        present = {c.config for c in self.cells}
        return [name for name in CONFIGS if name in present]

    def table(self, mode: str) -> str:
        p50, p99 = ("ttfb_p50_us", "ttfb_p99_us") if mode == "sse" else ("p50_us", "p99_us")
        what = "time to first byte" if mode == "sse" else "latency"
        configs = self.configs()
        head = ["size", "c", "direct rps", f"direct {what} p50/p99 ms"]
        for name in configs[1:]:
            head += [f"{SHORT[name]} rps", f"{SHORT[name]} +p50/+p99 ms"]
        head += ["pass/ref +p50", "pass/litellm rps"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for size, conc in self.rows(mode):
            row = [size, str(conc)]
            for name in configs:
                cell = self.cell(mode, size, conc, name)
                if cell is None:
                    row += ["-", "-"]
                    continue
                rps = f"{cell.get('rps'):.0f}" + ("*" if cell.get("errors") else "")
                if name == "direct":
                    lat = f"{_ms(cell.get(p50))} / {_ms(cell.get(p99))}"
                else:
                    lat = (
                        f"{_ms(self.added(mode, size, conc, name, p50))} / "
                        f"{_ms(self.added(mode, size, conc, name, p99))}"
                    )
                row += [rps, lat]
            ref_ratio = _ratio(
                self.added(mode, size, conc, "ctxproxy-pass", p50),
                self.added(mode, size, conc, "reference", p50),
            )
            row.append(_fmt(ref_ratio))
            row.append(_fmt(self.rps_ratio(mode, size, conc), 1))
            lines.append("| " + " | ".join(row) + " |")
        return "\n".join(lines)

    def cpu_table(self) -> str:
        """CPU time of the server process per completed request (robust to a busy machine)."""
        configs = self.configs()
        head = [
            "mode",
            "size",
            "c",
            *(f"{SHORT[n]} us" for n in configs),
            "pass/ref",
            "litellm/pass",
        ]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for mode in ("json", "sse"):
            for size, conc in self.rows(mode):
                row = [mode, size, str(conc)]
                for name in configs:
                    cell = self.cell(mode, size, conc, name)
                    row.append("-" if cell is None else f"{cell.get('cpu_us_per_request'):.0f}")
                mine, ref = (self.cell(mode, size, conc, n) for n in ("ctxproxy-pass", "reference"))
                row.append(
                    "-"
                    if mine is None or ref is None
                    else _fmt(_ratio(mine.get("cpu_us_per_request"), ref.get("cpu_us_per_request")))
                )
                lite = self.cell(mode, size, conc, "litellm")
                row.append(
                    "-"
                    if mine is None or lite is None
                    else _fmt(
                        _ratio(lite.get("cpu_us_per_request"), mine.get("cpu_us_per_request")), 1
                    )
                )
                lines.append("| " + " | ".join(row) + " |")
        return "\n".join(lines)

    def rps_ratio(self, mode: str, size: str, conc: int) -> float:
        """ctxproxy-pass rps / LiteLLM rps; NaN when LiteLLM completed fewer requests than the
        concurrency in the window (its rate is then not measured: see the CPU table)."""
        mine, theirs = (
            self.cell(mode, size, conc, "ctxproxy-pass"),
            self.cell(mode, size, conc, "litellm"),
        )
        if mine is None or theirs is None or theirs.get("requests") < max(conc, 10):
            return float("nan")
        return _ratio(mine.get("rps"), theirs.get("rps"))


BUFFERED_BYTES = 16 * 1024 * 1024
"""Cells whose concurrency x body size exceeds this are dominated by request buffering."""


def memory_summary(
    memory: dict[str, dict[str, Any]], samples: dict[str, list[Any]], body_bytes: dict[str, int]
) -> None:
    """Adds per-phase RSS ranges, the peak under unbuffered load and a flatness verdict.

    Flat: in every cell at constant load that is not buffering-dominated, RSS at the end of the
    cell is within max(8 MB, 5% of the start RSS) of RSS one second into the cell.
    """
    for name, info in memory.items():
        cells: dict[str, list[tuple[float, int]]] = {}
        for t, phase, kb in samples.get(name, []):
            if phase.count("|") == 3 and phase.endswith("|" + name):
                cells.setdefault(phase, []).append((t, kb))
        phases: dict[str, list[int]] = {}
        small_peak, worst, where = info["start_kb"], 0, ""
        allowed = max(8 * 1024, info["start_kb"] // 20)
        for phase, points in cells.items():
            mode, size, conc, _ = phase.split("|")
            kbs = [kb for _, kb in points]
            phases.setdefault(f"{mode} {size}", []).extend(kbs)
            if int(conc) * body_bytes[size] > BUFFERED_BYTES:
                continue
            small_peak = max(small_peak, *kbs)
            steady = [kb for t, kb in points if t >= points[0][0] + 1.0]
            if len(steady) >= 2 and steady[-1] - steady[0] > worst:
                worst, where = steady[-1] - steady[0], f"{mode} {size} c={conc}"
        info["rss_range_kb"] = {k: (min(v), max(v)) for k, v in phases.items()}
        info["unbuffered_peak_kb"] = max(small_peak, info["hwm_kb"].get("unbuffered cells", 0))
        info["worst_growth_kb"] = worst
        info["worst_growth_cell"] = where
        info["flat"] = worst <= allowed


def rss_table(memory: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| process | RSS at rest MB | RSS after the checks MB | peak RSS, unbuffered cells MB "
        "| RSS range per phase MB | VmHWM MB | worst growth within a cell MB | flat |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, info in memory.items():
        ranges = ", ".join(
            f"{k} {lo / 1024:.0f}-{hi / 1024:.0f}" for k, (lo, hi) in info["rss_range_kb"].items()
        )
        peaks = ", ".join(f"{k} {v / 1024:.0f}" for k, v in info["hwm_kb"].items())
        growth = f"{info['worst_growth_kb'] / 1024:+.1f} ({info['worst_growth_cell'] or '-'})"
        lines.append(
            f"| {name} | {info.get('rest_kb', 0) / 1024:.0f} | {info['start_kb'] / 1024:.0f} | "
            f"{info['unbuffered_peak_kb'] / 1024:.0f} | {ranges} | {peaks} | {growth} | "
            f"{'yes' if info['flat'] else 'NO'} |"
        )
    return "\n".join(lines)


def targets(
    res: Results, memory: dict[str, dict[str, Any]], sizes: list[str]
) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for each target of the issue; met None = not measured."""
    out: list[tuple[str, str, bool | None]] = []
    small = sizes[0]
    concs = sorted({c.concurrency for c in res.cells if c.mode == "json" and c.size == small})
    added = res.added("json", small, 1, "ctxproxy-pass", "p50_us")
    out.append(
        (
            f"passthrough +p50 <= 1 ms ({small}, c=1)",
            f"{_ms(added)} ms",
            None if math.isnan(added) else added <= 1000,
        )
    )
    worst, where = 0.0, ""
    for size in sizes:
        for conc in concs:
            ratio = _ratio(
                res.added("json", size, conc, "ctxproxy-pass", "p50_us"),
                res.added("json", size, conc, "reference", "p50_us"),
            )
            if not math.isnan(ratio) and ratio > worst:
                worst, where = ratio, f"{size} c={conc}"
    out.append(
        (
            "passthrough +p50 <= 1.3x reference +p50 (every c, every size)",
            f"worst {worst:.2f}x ({where})",
            worst <= 1.3 if where else None,
        )
    )
    for size in sizes:
        ratios = [
            (res.rps_ratio(c.mode, c.size, c.concurrency), f"c={c.concurrency}")
            for c in res.cells
            if c.config == "ctxproxy-pass"
            and c.size == size
            and c.mode == "json"
            and c.concurrency >= 16
        ]
        ratios = [r for r in ratios if not math.isnan(r[0])]
        what = f"throughput >= 20x LiteLLM ({size}, non-streaming, c >= 16)"
        low = min(ratios) if ratios else None
        out.append(
            (
                what,
                f"min {low[0]:.1f}x ({low[1]})" if low else "not measured",
                low[0] >= 20 if low else None,
            )
        )
    cpu = [
        (
            _ratio(lite.get("cpu_us_per_request"), mine.get("cpu_us_per_request")),
            f"{mine.mode} {mine.size} c={mine.concurrency}",
        )
        for mine in res.cells
        if mine.config == "ctxproxy-pass"
        for lite in [res.cell(mine.mode, mine.size, mine.concurrency, "litellm")]
        if lite
    ]
    cpu = [r for r in cpu if not math.isnan(r[0])]
    if cpu:
        low = min(cpu)
        out.append(
            (
                "capacity >= 20x LiteLLM (CPU per request, every cell)",
                f"min {low[0]:.1f}x ({low[1]})",
                low[0] >= 20,
            )
        )
    for name in ("ctxproxy-pass", "ctxproxy-offload"):
        info = memory.get(name)
        if info is None:
            continue
        peak = info["unbuffered_peak_kb"]
        every = info["hwm_kb"].get("all cells", peak)
        out.append(
            (
                f"{name}: RSS < 120 MB (cells with c x body <= 16 MB)",
                f"{peak / 1024:.0f} MB (peak of all cells: {every / 1024:.0f} MB)",
                peak < 120 * 1024,
            )
        )
        growth = info["worst_growth_kb"] / 1024
        out.append(
            (
                f"{name}: RSS flat at constant load",
                f"worst {growth:+.1f} MB in one cell",
                info["flat"],
            )
        )
    worst_ttfb, where = -math.inf, ""
    for size, conc in res.rows("sse"):
        added = res.added("sse", size, conc, "ctxproxy-pass", "ttfb_p50_us")
        if not math.isnan(added) and added > worst_ttfb:
            worst_ttfb, where = added, f"{size} c={conc}"
    c1 = res.added("sse", small, 1, "ctxproxy-pass", "ttfb_p50_us")
    out.append(
        (
            f"streaming: +TTFB p50 <= 2 ms ({small}, c=1)",
            f"{_ms(c1)} ms",
            None if math.isnan(c1) else c1 <= 2000,
        )
    )
    if where:
        out.append(
            (
                "streaming: +TTFB p50 <= 2 ms (every c)",
                f"worst {_ms(worst_ttfb)} ms ({where})",
                worst_ttfb <= 2000,
            )
        )
    return out


def targets_table(rows: list[tuple[str, str, bool | None]]) -> str:
    lines = ["| target | measured | met |", "|---|---|---|"]
    for name, measured, met in rows:
        verdict = "n/a" if met is None else ("yes" if met else "**no**")
        lines.append(f"| {name} | {measured} | {verdict} |")
    return "\n".join(lines)


def write_section(path: Path, section: str, heading: str = "## Overhead") -> None:
    """Replace (or append) the `heading` section of `path`, leaving other sections alone.

    A `### Profile` subsection (written by hand) is carried over into the new section.
    """
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(heading)}\s*$.*?(?=^## |\Z)", re.M | re.S)
    body = section.rstrip() + "\n\n"
    old = pattern.search(text)
    if old:
        kept = re.search(r"^### Profile.*?(?=^### |\Z)", old.group(0), re.M | re.S)
        if kept:
            body += kept.group(0).rstrip() + "\n\n"
        text = pattern.sub(lambda _m: body, text, count=1)
    else:
        text = text.rstrip() + "\n\n" + body
    path.write_text(text.rstrip() + "\n")
