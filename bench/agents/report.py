"""The report: a Markdown table per CLI printed, and `report.json` + `report.md` in the out dir.

Columns: turn, request number within the turn (k) and overall (seq), route and status, model,
the proxy's tokens before -> after, actions, outcome (`INVALID` when `invalid_forwarded` was seen
anywhere; "(dry run)" when only the dry run's manifest gave it), the cached input tokens the
upstream reported (the fake's prompt cache), the tools (count, tokens, share of the request),
where the cache marks sit in the client body and in the prepared body, the prefix kept from the
previous prepared body (items kept / items before, token share; the client bodies' own in
parentheses) and what the fake answered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ABBREVIATIONS = (
    ("messages", "m"),
    ("content", "c"),
    ("system", "s"),
    ("tools", "t"),
    ("input", "i"),
)
HEADER = (
    "turn",
    "k",
    "seq",
    "route",
    "model",
    "tokens before->after",
    "actions",
    "outcome",
    "cached",
    "tools n/tok/share",
    "marks client",
    "marks upstream",
    "prefix kept up (client)",
    "fake",
)


def _marks(paths: list[str]) -> str:
    if not paths:
        return "-"
    short = []
    for path in paths:
        for long, brief in ABBREVIATIONS:
            path = path.replace(long, brief)
        short.append(path)
    return " ".join(short)


def _prefix(kept: dict[str, Any] | None) -> str:
    if not kept:
        return "-"
    share = kept["token_share"]
    return (
        f"{kept['kept_items']}/{kept['previous_items']} {share:.0%}" if share is not None else "-"
    )


def _cells(row: dict[str, Any]) -> list[str]:
    tools = row["tools"] or {}
    share = tools.get("share")
    prefix = row["prefix_kept"] or {}
    outcome = str(row["outcome"] or "-")
    if row["outcome_source"] == "dry_run":
        outcome += " (dry run)"
    if row["invalid_forwarded"] and "invalid" not in outcome:
        outcome += " INVALID"
    notes = [n for n in row["notes"] if n != "invalid_forwarded"]
    before, after = row["tokens_before"], row["tokens_after"]
    return [
        str(row["turn"]),
        str(row["k"]),
        str(row["seq"]),
        f"{row['method']} {row['path']} {row['status']}",
        str(row["model"] or "-"),
        "-" if before is None else f"{before} -> {after}",
        str(row["actions"] or "-"),
        outcome + (f" ({','.join(notes)})" if notes else ""),
        "-" if row["cached_tokens"] is None else str(row["cached_tokens"]),
        f"{tools['count']}/{tools['tokens']}/{share:.0%}" if share is not None else "-",
        _marks(row["cache_marks"]["client"]),
        " | ".join(_marks(m) for m in row["cache_marks"]["upstream"]) or "-",
        f"{_prefix(prefix.get('upstream'))} ({_prefix(prefix.get('client'))})",
        "+".join(row["fake_answers"]) or "-",
    ]


def markdown_table(header: tuple[str, ...] | list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render(rows: list[dict[str, Any]], turns: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    parts = [f"# bench.agents run ({meta['proxy']})", ""]
    for cli in dict.fromkeys(r["cli"] for r in turns):
        version = next(t["version"] for t in turns if t["cli"] == cli)
        parts += [f"## {cli} {version}", ""]
        parts.append(markdown_table(HEADER, [_cells(r) for r in rows if r["cli"] == cli]))
        parts.append("")
        turn_header = ("turn", "exit", "final answer reached", "requests", "seconds")
        parts.append(
            markdown_table(
                turn_header,
                [
                    [
                        str(t["turn"]),
                        str(t["exit_code"]),
                        "yes" if t["answered"] else "NO",
                        str(t["requests"]),
                        str(t["seconds"]),
                    ]
                    for t in turns
                    if t["cli"] == cli
                ],
            )
        )
        parts.append("")
    return "\n".join(parts)


def write(
    out: Path, rows: list[dict[str, Any]], turns: list[dict[str, Any]], meta: dict[str, Any]
) -> str:
    out.mkdir(parents=True, exist_ok=True)
    text = render(rows, turns, meta)
    (out / "report.md").write_text(text)
    payload = {"meta": meta, "turns": turns, "requests": rows}
    (out / "report.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False))
    return text
