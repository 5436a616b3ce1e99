"""What `bench/hostile/run.py` counts (`Tally`), how it reads an error answer, and its report:
the tables of the run and, with `--examples`, the bodies of the first case of each finding."""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Tally:
    requests: collections.Counter[str] = field(default_factory=collections.Counter)
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    proxy_5xx: collections.Counter[str] = field(default_factory=collections.Counter)
    expected_5xx: int = 0
    no_answer: collections.Counter[str] = field(default_factory=collections.Counter)
    stream_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    findings: collections.Counter[str] = field(default_factory=collections.Counter)
    upstream_bodies: int = 0
    broken_pairs: collections.Counter[str] = field(default_factory=collections.Counter)
    arrived_broken: collections.Counter[str] = field(default_factory=collections.Counter)
    log_lines: collections.Counter[str] = field(default_factory=collections.Counter)
    actions: collections.Counter[str] = field(default_factory=collections.Counter)
    with_rounds: int = 0
    error_codes: collections.Counter[str] = field(default_factory=collections.Counter)
    examples: dict[str, tuple[bytes | None, bytes]] = field(default_factory=dict)
    """The first (client body, upstream body) of each kind of broken pair (`--examples`)."""
    seconds: dict[str, float] = field(default_factory=lambda: collections.defaultdict(float))


def error_code(answer: bytes) -> str:
    try:
        return str(json.loads(answer)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return answer[:60].decode(errors="replace")


def stream_error_codes(answer: bytes) -> list[str]:
    """Chat error chunks (`{"error": ...}`), Responses `error` events and failed responses."""
    codes = []
    for line in answer.split(b"\n"):
        if line.startswith(b"data: {") and (b'"error"' in line or b"response.failed" in line):
            try:
                event = json.loads(line[6:])
            except ValueError:
                continue
            error = event.get("error")
            if event.get("type") == "response.failed":
                codes.append("response.failed")
            elif event.get("type") == "error":
                codes.append(str(event.get("code")))
            elif isinstance(error, dict):
                codes.append(str(error.get("code")))
    return codes


def write_examples(folder: Path, tally: Tally) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for k, (what, (original, upstream)) in enumerate(sorted(tally.examples.items())):
        (folder / f"{k}.what.txt").write_text(what)
        (folder / f"{k}.client.json").write_bytes(original or b"")
        (folder / f"{k}.upstream.json").write_bytes(upstream)


def print_table(tally: Tally) -> None:
    total = sum(tally.requests.values())
    print(f"\n| requests by category ({total} in all) | n | s (sum) |\n|---|---|---|")
    for category, n in sorted(tally.requests.items()):
        print(f"| {category} | {n} | {tally.seconds[category]:.0f} |")
    histogram = ", ".join(f"{s}: {n}" for s, n in sorted(tally.statuses.items()))
    rows = [
        ("status histogram", histogram),
        ("proxy 5xx", _counted(tally.proxy_5xx)),
        ("5xx answering an upstream failure made on purpose", str(tally.expected_5xx)),
        ("requests without an answer", _counted(tally.no_answer)),
        ("SSE error events", _counted(tally.stream_errors)),
        ("error answers (format, status, code; client's pairs sound or broken)",
         _counted(tally.error_codes, 12)),
        ("x-ctxproxy-actions (answers naming each step)", _counted(tally.actions)),
        ("requests with synthetic read rounds", str(tally.with_rounds)),
        ("bodies received upstream (checked for tool pairs)", str(tally.upstream_bodies)),
        ("broken tool pairs upstream (client's pairs sound)", _counted(tally.broken_pairs)),
        ("upstream bodies of requests broken on arrival", _counted(tally.arrived_broken)),
        ("case findings", _counted(tally.findings)),
        ("proxy log: Traceback / ERROR / exit", _counted(tally.log_lines)),
    ]
    print("\n| measured | value |\n|---|---|")
    for what, value in rows:
        print(f"| {what} | {value} |")


def _counted(counter: collections.Counter[Any], most: int = 8) -> str:
    if not counter:
        return "0"
    parts = "; ".join(f"{k}: {n}" for k, n in counter.most_common(most))
    return f"{sum(counter.values())} ({parts})"
