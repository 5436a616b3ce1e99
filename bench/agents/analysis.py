"""One row per client request, from what the recorder, the fake, the proxy and its dry run saw.

A request's tokens, actions and outcome come from the proxy's answer headers (the access line
when a header is missing; the outcome from the dry run's manifest when the proxy reports none, as
before `x-ctxproxy-outcome` existed); `invalid_forwarded` is looked for in the outcome, in
`x-ctxproxy-notes` and in the dry run's manifest. The tool share is the tools' tokens over the
dry run's `tokens_before`. "Prefix kept" compares a request's first prepared body (what the fake
received) with the previous prepared body of the same CLI's agent loop, and likewise the client
bodies (so the proxy's effect can be told from the CLI's own).
"""

from __future__ import annotations

from typing import Any

from bench.agents import measures
from bench.agents.dry_run import route_of
from bench.agents.fake_common import UpstreamRecord
from bench.agents.recorder import ClientRecord
from bench.agents.run import RunData

LOOP_ANSWERS = ("tool_call", "search_call", "final")
INVALID = "invalid_forwarded"


def _header(record: ClientRecord, name: str) -> str | None:
    lowered = {k.lower(): v for k, v in record.response_headers.items()}
    return lowered.get(name)


def _decision(record: ClientRecord, data: RunData) -> dict[str, Any]:
    access = data.access.get(_header(record, "x-ctxproxy-request-id") or "", {})
    manifest = (data.manifests.get(record.seq) or {}).get("manifest") or {}

    def pick(header: str, field: str) -> Any:
        value = _header(record, header)
        return value if value is not None else access.get(field)

    notes = [n for n in (_header(record, "x-ctxproxy-notes") or "").split(",") if n]
    outcome = pick("x-ctxproxy-outcome", "outcome")
    source = None if outcome is None else "proxy"
    if outcome is None and manifest.get("outcome"):  # a proxy without the outcome header
        outcome, source = manifest["outcome"], "dry_run"
    dry_codes = list(manifest.get("note_codes") or [])
    invalid = INVALID in (outcome, manifest.get("outcome")) or INVALID in notes + dry_codes
    return {
        "tokens_before": _int(pick("x-ctxproxy-tokens-before", "tokens_before")),
        "tokens_after": _int(pick("x-ctxproxy-tokens-after", "tokens_after")),
        "actions": pick("x-ctxproxy-actions", "actions"),
        "outcome": outcome,
        "outcome_source": source,
        "notes": notes,
        "cached_tokens": _int(pick("x-ctxproxy-cached-tokens", "cached_tokens")),
        "synthetic_rounds": access.get("synthetic_rounds"),
        "invalid_forwarded": invalid,
        "dry_run": {
            "tokens_before": manifest.get("tokens_before"),
            "outcome": manifest.get("outcome"),
            "note_codes": dry_codes,
            "notes": manifest.get("notes") or [],
            "counting_method": manifest.get("counting_method"),
            "context_window": manifest.get("context_window"),
        }
        if manifest
        else None,
    }


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _tools(body: dict[str, Any], denominator: int | None) -> dict[str, Any]:
    tools = measures.tool_definitions(body)
    tokens = measures.tool_tokens(body)
    share = tokens / denominator if denominator else None
    return {
        "count": len(measures.tool_names(tools)),
        "top_level": len(tools),
        "tokens": tokens,
        "share": None if share is None else round(share, 4),
        "names": measures.tool_names(tools),
    }


class _Prefixes:
    """The previous agent-loop body per CLI, client side and upstream side."""

    def __init__(self) -> None:
        self.client: dict[str, dict[str, Any]] = {}
        self.upstream: dict[str, dict[str, Any]] = {}

    def step(self, cli: str, body: dict[str, Any], loop: list[UpstreamRecord]) -> dict[str, Any]:
        out: dict[str, Any] = {"client": None, "upstream": None}
        if cli in self.client:
            out["client"] = measures.prefix_kept(self.client[cli], body).as_dict()
        if loop and cli in self.upstream:
            out["upstream"] = measures.prefix_kept(self.upstream[cli], loop[0].body).as_dict()
        self.client[cli] = body
        if loop:
            self.upstream[cli] = loop[-1].body
        return out


def build_rows(data: RunData) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    prefixes = _Prefixes()
    per_turn: dict[tuple[str, int], int] = {}
    for record in data.client:
        key = (record.cli, record.turn)
        per_turn[key] = per_turn.get(key, 0) + 1
        upstream = [u for u in data.upstream if u.seq == record.seq and u.answer != "other"]
        loop = [u for u in upstream if u.answer in LOOP_ANSWERS]
        body = record.json_body()
        body = body if isinstance(body, dict) else {}
        decision = _decision(record, data)
        dry_before = (decision["dry_run"] or {}).get("tokens_before")
        rows.append(
            {
                "cli": record.cli,
                "version": data.installed[record.cli].version,
                "turn": record.turn,
                "k": per_turn[key],
                "seq": record.seq,
                "method": record.method,
                "route": route_of(record),
                "path": record.path,
                "model": body.get("model"),
                "status": record.status,
                "client_bytes": len(record.body),
                "upstream_bytes": [u.size for u in upstream],
                "fake_answers": [u.answer for u in upstream],
                **decision,
                "tools": _tools(body, dry_before) if body else None,
                "cache_marks": {
                    "client": list(measures.cache_marks(body)),
                    "upstream": [list(measures.cache_marks(u.body)) for u in upstream],
                },
                "prefix_kept": prefixes.step(record.cli, body, loop) if loop else None,
                "seconds": round(record.seconds, 3),
            }
        )
    return rows


def turn_rows(data: RunData) -> list[dict[str, Any]]:
    return [
        {
            "cli": t.cli,
            "version": data.installed[t.cli].version,
            "turn": t.turn,
            "exit_code": t.exit_code,
            "answered": t.answered,
            "expected": t.expected,
            "seconds": round(t.seconds, 2),
            "stdout_tail": t.stdout.strip()[-200:],
            "requests": sum(1 for r in data.client if (r.cli, r.turn) == (t.cli, t.turn)),
        }
        for t in data.turns
    ]
