"""Scrubbed client requests as fixtures for CI tests (`tests/fixtures/agents/`).

Per CLI, the model requests worth replaying: the first of turn 1 (fresh session, no history),
the first of turn 2 (a continued session's first request), and the one carrying the large shell
result in turns 1 and 3 (the request the fake answered with the final text). Each file is one
wrapper object: `{"meta": {...}, "headers": {...}, "body": {...}}`; `headers` holds the request
headers that change what a body means (never credentials), `body` the client's body as sent
(scrubbed, see `scrub`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.agents import scrub
from bench.agents.dry_run import dry_run_format
from bench.agents.fake_common import UpstreamRecord
from bench.agents.recorder import ClientRecord
from bench.agents.run import RunData

KEPT_HEADERS = (
    "anthropic-beta",
    "anthropic-version",
    "anthropic-dangerous-direct-browser-access",
    "x-app",
    "user-agent",
    "accept",
    "content-type",
    "originator",
    "openai-beta",
    "x-openai-internal-codex-responses-lite",
    "x-codex-beta-features",
)
FILE_STEM = {"claude": "claude_code", "codex": "codex"}


def _kept_headers(headers: dict[str, str]) -> dict[str, str]:
    lowered = {k.lower(): v for k, v in headers.items()}
    return {name: lowered[name] for name in KEPT_HEADERS if name in lowered}


def _turn_index(data: RunData, record: ClientRecord) -> int:
    same = [r.seq for r in data.client if (r.cli, r.turn) == (record.cli, record.turn)]
    return same.index(record.seq) + 1


def _answers(upstream: list[UpstreamRecord], seq: int) -> list[str]:
    return [u.answer for u in upstream if u.seq == seq]


def select(data: RunData, cli: str) -> list[tuple[ClientRecord, str]]:
    """The records to keep for `cli`, each with what it is."""
    model = [r for r in data.client if r.cli == cli and dry_run_format(r) is not None]
    chosen: list[tuple[ClientRecord, str]] = []
    for turn in (1, 2):
        first = next((r for r in model if r.turn == turn), None)
        if first is not None:
            label = (
                "first request of a new session"
                if turn == 1
                else ("first request of a continued session")
            )
            chosen.append((first, label))
    for turn in (1, 3):
        carrying = [
            r for r in model if r.turn == turn and "final" in _answers(data.upstream, r.seq)
        ]
        if carrying:
            chosen.append((carrying[0], f"carries the large shell result of turn {turn}"))
    return sorted(chosen, key=lambda pair: pair[0].seq)


def fixture(
    data: RunData, record: ClientRecord, what: str, scrubber: scrub.Scrubber
) -> dict[str, Any]:
    version = data.installed[record.cli].version
    meta = {
        "cli": record.cli,
        "version": version,
        "turn": record.turn,
        "k": _turn_index(data, record),
        "method": record.method,
        "path": record.path,
        "what": what,
    }
    wrapper = {"meta": meta, "headers": _kept_headers(record.headers), "body": record.json_body()}
    return dict(scrubber(wrapper))


def write(data: RunData, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for cli in data.installed:
        scrubber = scrub.Scrubber(data.sandboxes[cli].root)
        for record, what in select(data, cli):
            value = fixture(data, record, what, scrubber)
            left = scrub.leftovers(value, data.sandboxes[cli].root)
            if left:
                raise ValueError(f"seq {record.seq}: the scrubbed fixture still names {left}")
            meta = value["meta"]
            name = f"{FILE_STEM[cli]}_{meta['version']}_turn{meta['turn']}_{meta['k']}.json"
            path = directory / name
            path.write_text(json.dumps(value, ensure_ascii=False, indent=1) + "\n")
            written.append(path)
    return written
