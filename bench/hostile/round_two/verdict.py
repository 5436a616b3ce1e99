"""What each phase of the round-two run counts, its targets and the tables (pure: no I/O).

A phase misses its targets when it has a proxy 5xx, a request without an answer, a broken tool
pair in what the upstream received, a `/healthz` probe unanswered or a p99 of 100 ms or more, a
Traceback/ERROR line in the proxy's log, or any of its own checks failed.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

HEALTHZ_P99_MS = 100.0


@dataclass(frozen=True)
class Check:
    """One of a phase's own targets: what is checked, the figure measured, whether it is met."""

    what: str
    figure: str
    ok: bool


@dataclass
class PhaseResult:
    name: str
    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    proxy_5xx: int = 0
    no_answer: int = 0
    bodies_checked: int = 0
    broken_pairs: collections.Counter[str] = field(default_factory=collections.Counter)
    latencies: list[float] = field(default_factory=list)
    """Seconds each `/healthz` probe took (an unanswered one: the time until it gave up)."""
    probes_failed: int = 0
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Figures reported beside the targets (not targets themselves)."""
    log_lines: collections.Counter[str] = field(default_factory=collections.Counter)

    def count(self, label: str, *, expected_5xx: bool = False) -> None:
        """One answer: `label` is its status and error code ("400 invalid_json"), or the
        client's failure ("timeout", an exception's name). `expected_5xx`: a 502/503/504 here
        answers an upstream failure made on purpose."""
        self.statuses[label] += 1
        status = label.split(" ", 1)[0]
        if not status.isdigit():
            self.no_answer += 1
        elif status.startswith("5") and not (expected_5xx and status in ("502", "503", "504")):
            self.proxy_5xx += 1

    def check(self, what: str, figure: str, ok: bool) -> None:
        self.checks.append(Check(what, figure, ok))

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())


def percentile_ms(latencies: list[float], q: float) -> float:
    """The `q` quantile (nearest rank, as the other hostile runs report it) in ms; NaN if none."""
    if not latencies:
        return float("nan")
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def misses(result: PhaseResult) -> list[str]:
    found = []
    if result.proxy_5xx:
        found.append(f"{result.proxy_5xx} proxy 5xx")
    if result.no_answer:
        found.append(f"{result.no_answer} without an answer")
    if result.broken_pairs:
        found.append(f"{sum(result.broken_pairs.values())} broken pairs upstream")
    p99 = percentile_ms(result.latencies, 0.99)
    if not result.latencies:
        found.append("no /healthz probe")
    elif not p99 < HEALTHZ_P99_MS:
        found.append(f"/healthz p99 {p99:.1f} ms")
    if result.probes_failed:
        found.append(f"{result.probes_failed} probes unanswered")
    if result.log_lines:
        found.append(f"{sum(result.log_lines.values())} Traceback/ERROR lines")
    found += [f"{c.what}: {c.figure}" for c in result.checks if not c.ok]
    return found


def statuses_text(statuses: collections.Counter[str]) -> str:
    return ", ".join(f"{label} x{n}" for label, n in sorted(statuses.items()))


PHASE_HEADER = (
    "| phase | requests | statuses | proxy 5xx | no answer | upstream bodies checked | broken "
    "pairs | /healthz ok/sent | p50 ms | p99 ms | max ms | verdict |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)
CHECK_HEADER = "| phase | check | figure | met |\n|---|---|---|---|"


def phase_row(result: PhaseResult) -> str:
    answered = len(result.latencies) - result.probes_failed
    missed = misses(result)
    verdict = "MISS: " + "; ".join(missed) if missed else "ok"
    return (
        f"| {result.name} | {result.requests} | {statuses_text(result.statuses)} | "
        f"{result.proxy_5xx} | {result.no_answer} | {result.bodies_checked} | "
        f"{sum(result.broken_pairs.values())} | {answered}/{len(result.latencies)} | "
        f"{percentile_ms(result.latencies, 0.5):.1f} | "
        f"{percentile_ms(result.latencies, 0.99):.1f} | "
        f"{percentile_ms(result.latencies, 1.0):.1f} | {verdict} |"
    )


def tables(results: list[PhaseResult]) -> str:
    """The per-phase table, then every phase's own checks."""
    phases = "\n".join(phase_row(r) for r in results)
    checks = "\n".join(
        f"| {r.name} | {c.what} | {c.figure} | {'yes' if c.ok else 'NO'} |"
        for r in results
        for c in r.checks
    )
    notes = "\n".join(f"- {r.name}: {note}" for r in results for note in r.notes)
    return f"{PHASE_HEADER}\n{phases}\n\n{CHECK_HEADER}\n{checks}" + (
        f"\n\nNot targets:\n{notes}" if notes else ""
    )


def exit_code(results: list[PhaseResult]) -> int:
    """1 when any phase missed a target (or none ran), else 0."""
    return 1 if not results or any(misses(r) for r in results) else 0
