"""What the real-upstream run records per call (`Call`) and the Markdown it prints: the per-turn
table, and the summary (the first failing direct turn, the successes through ctxproxy per variant,
the calibration = ctxproxy's count / the server's `usage.prompt_tokens`)."""

from __future__ import annotations

import collections
import statistics
from dataclasses import dataclass, field


@dataclass
class Call:
    turn: int
    messages: int
    ok: bool
    status: int
    seconds: float
    prompt_tokens: int | None = None  # the server's usage.prompt_tokens (or its error's count)
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    tokens_before: int | None = None  # x-ctxproxy-tokens-before
    tokens_after: int | None = None  # x-ctxproxy-tokens-after
    actions: str | None = None  # x-ctxproxy-actions
    summary: str | None = None  # x-ctxproxy-summary (compaction: kind:source[:failure])
    dry_run: dict[str, int] = field(default_factory=dict)  # variant -> ctxproxy count (direct)
    forwarded: int | None = None  # messages sent upstream when ctxproxy reduced the request
    without_tools: int | None = None  # ctxproxy's count of those without its synthetic tools
    answer: str = ""



def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _ratio(a: int | None, b: int | None) -> float | None:
    return a / b if a is not None and b else None


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return (
        f"{statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f}, "
        f"n={len(values)})"
    )


def _short(text: str | None, width: int = 90) -> str:
    text = (text or "").replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def turn_table(direct: list[Call], proxied: list[Call], main: str) -> list[str]:
    rows = [
        "| turn | msgs | direct | server prompt_tokens (direct) | ctxproxy count of that body | "
        "via ctxproxy | msgs sent | ctxproxy before → after | after w/o synthetic tools | "
        "server prompt_tokens (proxied) | after / server | actions | s |",
        "|---:|---:|---|---:|---:|---|---:|---|---:|---:|---:|---|---:|",
    ]
    for d, p in zip(direct, proxied, strict=True):
        d_status = "ok" if d.ok else f"**{d.status}**"
        if d.ok and d.finish_reason == "length" and d.completion_tokens is not None:
            d_status += f" (cut at {d.completion_tokens} tokens)"
        p_status = "ok" if p.ok else f"**{p.status}**"
        ratio = _ratio(p.tokens_after, p.prompt_tokens)
        rows.append(
            f"| {d.turn} | {d.messages} | {d_status} | {_cell(d.prompt_tokens)} | "
            f"{_cell(d.dry_run.get(main))} | {p_status} | {p.forwarded or p.messages} | "
            f"{_cell(p.tokens_before)} → {_cell(p.tokens_after)} | {_cell(p.without_tools)} | "
            f"{_cell(p.prompt_tokens)} | {'-' if ratio is None else f'{ratio:.2f}'} | "
            f"{p.actions or '-'} | {p.seconds:.1f} |"
        )
    return rows


def _direct_lines(direct: list[Call], window: int) -> list[str]:
    first_fail = next((c for c in direct if not c.ok), None)
    if first_fail is None:
        return [f"- direct: all {len(direct)} turns succeeded (the window was never exceeded)"]
    last_ok = max((c.prompt_tokens or 0 for c in direct if c.ok), default=0)
    fails = sum(not c.ok for c in direct)
    lines = [
        f"- direct: first failure at turn {first_fail.turn} ({first_fail.messages} messages, "
        f"{_cell(first_fail.prompt_tokens)} prompt tokens by the server's count, n_ctx {window}); "
        f"{fails}/{len(direct)} turns failed; largest prompt that succeeded: {last_ok} tokens.",
        f"- direct error: HTTP {first_fail.status} `{_short(first_fail.error, 300)}`",
    ]
    cut = [
        f"turn {c.turn} ({c.prompt_tokens} + {c.completion_tokens} tokens)"
        for c in direct
        if c.ok
        and c.finish_reason == "length"
        and (c.prompt_tokens or 0) + (c.completion_tokens or 0) >= window
    ]
    if cut:
        lines.append(
            f"- direct: answered, but the answer was cut short by the window: {', '.join(cut)}"
        )
    return lines


def summary(
    direct: list[Call], runs: dict[str, list[Call]], methods: dict[str, str], window: int
) -> list[str]:
    lines = [
        "",
        "### Summary",
        "",
        *_direct_lines(direct, window),
        "",
        "| tokenizer variant | counting method | ok via ctxproxy | first reduced turn | "
        "largest prompt sent (server count) |",
        "|---|---|---:|---:|---:|",
    ]
    for variant, calls in runs.items():
        ok = sum(c.ok for c in calls)
        acted = next((c.turn for c in calls if c.actions not in (None, "none")), None)
        largest = max((c.prompt_tokens or 0 for c in calls if c.ok), default=0)
        lines.append(
            f"| {variant} | {methods.get(variant, '?')} | {ok}/{len(calls)} | "
            f"{_cell(acted)} | {largest} |"
        )
    lines += [
        "",
        "Calibration = ctxproxy's count / the server's `usage.prompt_tokens` (median, min, max, "
        "n); below 1 means ctxproxy undercounts.",
        "",
        "| tokenizer variant | unmodified bodies (the direct run, every turn) | unmodified "
        "via ctxproxy | reduced via ctxproxy (tokens_after) | reduced, without the synthetic "
        "tools | server - ctxproxy per message (unmodified) |",
        "|---|---|---|---|---|---:|",
    ]
    for variant, calls in runs.items():
        plain = [c for c in calls if c.ok and c.actions in (None, "none")]
        reduced = [c for c in calls if c.ok and c.actions not in (None, "none")]
        on_direct = [r for c in direct if (r := _ratio(c.dry_run.get(variant), c.prompt_tokens))]
        per_message = [
            ((c.prompt_tokens or 0) - c.dry_run[variant]) / c.messages
            for c in direct
            if c.prompt_tokens and variant in c.dry_run
        ]
        gap = f"{statistics.median(per_message):+.2f}" if per_message else "-"
        lines.append(
            f"| {variant} | {_spread(on_direct)} | "
            f"{_spread([r for c in plain if (r := _ratio(c.tokens_after, c.prompt_tokens))])} | "
            f"{_spread([r for c in reduced if (r := _ratio(c.tokens_after, c.prompt_tokens))])} | "
            f"{_spread([r for c in reduced if (r := _ratio(c.without_tools, c.prompt_tokens))])}"
            f" | {gap} |"
        )
    summaries = {
        variant: collections.Counter(c.summary for c in calls if c.summary)
        for variant, calls in runs.items()
    }
    if any(summaries.values()):
        title = "Compaction (`x-ctxproxy-summary` of the proxied calls: kind:source[:failure]):"
        lines += ["", title, ""]
        for variant, counted in summaries.items():
            if counted:
                tally = ", ".join(f"`{k}` {n}" for k, n in sorted(counted.items()))
                lines.append(f"- {variant}: {tally}")
    lines.append("")
    for variant, calls in runs.items():
        for c in calls:
            if not c.ok:
                lines.append(
                    f"- {variant}: turn {c.turn} failed through ctxproxy (ctxproxy counted "
                    f"{_cell(c.tokens_after)}, the server {_cell(c.prompt_tokens)}): HTTP "
                    f"{c.status} `{_short(c.error, 300)}`"
                )
    return lines


def reeval_table(
    evaluated: dict[str, int], floors: dict[str, int], runs: dict[str, list[Call]], window: int
) -> list[str]:
    """Per conversation: the prompt tokens the server evaluated (its log), the perfect-cache
    floor of the same conversation, their ratio, the turns answered and the calls over the
    window."""
    lines = [
        "",
        "### Prompt tokens re-evaluated by the server (its own log) against a perfect cache",
        "",
        "| conversation | evaluated | perfect-cache floor | ratio | turns answered | "
        "calls over the window |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, calls in runs.items():
        done, floor = evaluated.get(name), floors.get(name)
        ratio = f"{done / floor:.2f}x" if done is not None and floor else "-"
        over = sum(1 for c in calls if (c.prompt_tokens or 0) > window)
        lines.append(
            f"| {name} | {_cell(done)} | {_cell(floor)} | {ratio} | "
            f"{sum(c.ok for c in calls)}/{len(calls)} | {over} |"
        )
    return lines
