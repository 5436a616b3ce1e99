"""One request's record, from its `RequestStats` and its answer (built after the answer went)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.artifacts.records import StoredRecord
from proxy.settings import SESSION_SCOPE_MARK
from proxy.stats import RecordedBodies, RequestStats, SyntheticCall

HEADER_PREFIX = "x-ctxproxy-"
CLIENT_CLOSED = 499


@dataclass(frozen=True, slots=True)
class Ending:
    """How the request ended, as the edge saw it."""

    request_id: str
    route: str
    format: str
    status: int
    headers: Mapping[str, str]
    seconds: float
    """From arrival to the end of the answer."""
    ended_at: float
    """Wall-clock seconds at the end."""


def outcome(stats: RequestStats, status: int) -> str:
    """`ok`, `refused` (by preparation), `upstream_error`, `error` (the proxy's own) or
    `cancelled` (the client went away)."""
    if status == CLIENT_CLOSED:
        return "cancelled"
    if stats.reason is not None:
        return "refused"
    if status < 400:
        return "ok"
    if stats.error is None or stats.error.startswith("upstream"):
        return "upstream_error"
    return "error"


def build_record(stats: RequestStats, end: Ending) -> StoredRecord:
    summary = _summary(stats, end)
    manifest = stats.manifest
    bodies, original, prepared = _bodies(stats.bodies)
    error = None
    if stats.error is not None:
        error = {"code": stats.error, "details": stats.error_details}
    detail = {
        "manifest": None if manifest is None else manifest.as_dict(),
        "headers": {k.lower(): v for k, v in end.headers.items() if _ours(k)},
        "rounds": [_call(call) for call in stats.synthetic_calls],
        "original": original,
        "prepared": prepared,
        "bodies": bodies,
        "error": error,
    }
    return StoredRecord(end.request_id, summary["time"], summary, detail)


def _ours(name: str) -> bool:
    return name[: len(HEADER_PREFIX)].lower() == HEADER_PREFIX


def _summary(stats: RequestStats, end: Ending) -> dict[str, Any]:
    manifest = stats.manifest
    usage, cost = stats.usage, stats.cost()
    upstream = stats.upstream_seconds
    scope = stats.scope or ""
    _, mark, session = scope.partition(SESSION_SCOPE_MARK)
    return {
        "request_id": end.request_id,
        "time": round(end.ended_at - end.seconds, 3),
        "tenant": stats.tenant,
        "session": session if mark else None,
        "route": end.route,
        "format": end.format,
        "model": manifest.model if manifest is not None else stats.model,
        "policy": stats.policy,
        "stream": stats.stream,
        "status": end.status,
        "outcome": outcome(stats, end.status),
        "reason": None if stats.reason is None else stats.reason.value,
        "tokens_before": None if manifest is None else manifest.tokens_before,
        "tokens_after": None if manifest is None else manifest.tokens_after,
        "actions": []
        if manifest is None
        else list(dict.fromkeys(a.step for a in manifest.actions)),
        "latency_ms": round(end.seconds * 1000, 1),
        "upstream_ms": None if upstream is None else round(upstream * 1000, 1),
        "synthetic_rounds": stats.synthetic_rounds,
        "usage": None
        if usage is None
        else {
            "input_tokens": usage.input,
            "cached_input_tokens": usage.cache_read,
            "cache_write_tokens": usage.cache_write,
            "output_tokens": usage.output,
        },
        "cost": None if cost is None else _cost(cost.usd, cost.unchanged_usd),
    }


def _cost(usd: float | None, unchanged: float | None) -> dict[str, float | None] | None:
    if usd is None and unchanged is None:
        return None
    saved = None if usd is None or unchanged is None else unchanged - usd
    return {"usd": usd, "unchanged_usd": unchanged, "saved_usd": saved}


def _call(call: SyntheticCall) -> dict[str, Any]:
    arguments = call.arguments
    if isinstance(arguments, str | bytes):
        with contextlib.suppress(orjson.JSONDecodeError):
            arguments = orjson.loads(arguments)
    artifact_id = arguments.get("artifact_id") if isinstance(arguments, dict) else None
    return {
        "round": call.round,
        "tool": call.tool,
        "arguments": arguments,
        "artifact_id": artifact_id if isinstance(artifact_id, str) else None,
        "result_chars": call.result_chars,
    }


def _bodies(bodies: RecordedBodies | None) -> tuple[str, Any, Any]:
    """`off`, `too_large` or `kept` with both bodies (written as they are: valid JSON text)."""
    if bodies is None:
        return "off", None, None
    if max(len(bodies.original), len(bodies.prepared)) > bodies.max_bytes:
        return "too_large", None, None
    return "kept", _json(bodies.original), _json(bodies.prepared)


def _json(raw: bytes) -> Any:
    """The body as JSON text to embed; one orjson does not read is kept as a string."""
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")
    return orjson.Fragment(raw)
