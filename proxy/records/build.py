"""One request's record, from its `RequestStats` and its answer (built after the answer went)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import orjson

from proxy.engine.manifest import Manifest
from proxy.settings import SESSION_SCOPE_MARK
from proxy.stats import RecordedBodies, RequestStats, SyntheticCall

HEADER_PREFIX = "x-ctxproxy-"
_PREFIX_LEN = len(HEADER_PREFIX)
CLIENT_CLOSED = 499


class Ending:
    """How the request ended, as the edge saw it (a plain class: built on every request)."""

    __slots__ = ("ended_at", "format", "headers", "request_id", "route", "seconds", "status")

    def __init__(
        self,
        request_id: str,
        route: str,
        format: str,
        status: int,
        headers: Mapping[str, str],
        seconds: float,
        ended_at: float,
    ) -> None:
        self.request_id, self.route, self.format = request_id, route, format
        self.status, self.headers = status, headers
        self.seconds = seconds
        """From arrival to the end of the answer."""
        self.ended_at = ended_at
        """Wall-clock seconds at the end."""


class PendingRecord:
    """A request's record (`artifacts.records.Record`) whose parts are built when first read:
    the request pays for handing it over, not for building it."""

    __slots__ = ("_detail", "_end", "_stats", "_summary", "request_id", "time")

    def __init__(self, stats: RequestStats, end: Ending) -> None:
        self._stats, self._end = stats, end
        self.request_id = end.request_id
        self.time = round(end.ended_at - end.seconds, 3)
        self._summary: dict[str, Any] | None = None
        self._detail: dict[str, Any] | None = None
        if stats.bodies is not None and _too_large(stats.bodies):
            stats.bodies = TOO_LARGE  # not held until the record is built

    @property
    def summary(self) -> dict[str, Any]:
        if self._summary is None:  # a plain check: `cached_property` takes a lock per read
            self._summary = _summary(self._stats, self._end, self.time)
        return self._summary

    @property
    def detail(self) -> dict[str, Any]:
        if self._detail is None:
            self._detail = _detail(self._stats, self._end)
        return self._detail


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


def _detail(stats: RequestStats, end: Ending) -> dict[str, Any]:
    """The manifest stays the object it is (orjson writes a dataclass natively, far quicker than
    `Manifest.as_dict`); `readable` makes it the dry run's dict when the record is read."""
    bodies, original, prepared = _bodies(stats.bodies)
    error = None
    if stats.error is not None:
        error = {"code": stats.error, "details": stats.error_details}
    return {
        "manifest": stats.manifest,
        "headers": _ours(end.headers),
        "rounds": [_call(call) for call in stats.synthetic_calls],
        "original": original,
        "prepared": prepared,
        "bodies": bodies,
        "error": error,
    }


def readable(record: dict[str, Any]) -> dict[str, Any]:
    """A whole record as the API answers it: the manifest as the dry run shows it (the steps
    that report no detail carry none)."""
    manifest = record.get("manifest")
    if isinstance(manifest, Manifest):
        record["manifest"] = manifest.as_dict()
    elif isinstance(manifest, dict):
        for action in manifest.get("actions") or ():
            if isinstance(action, dict) and action.get("detail", ...) is None:
                del action["detail"]
    return record


def _ours(headers: Mapping[str, str]) -> dict[str, str]:
    """The answer's `x-ctxproxy-*` headers (the proxy writes its own in lower case), by plain
    `str` names (an aiohttp answer's are `istr`, which orjson does not take as keys); a slice
    compared is quicker than `startswith` on most of them, which are not ours."""
    ours, size = HEADER_PREFIX, _PREFIX_LEN
    return {str(name): value for name, value in headers.items() if name[:size] == ours}


def _summary(stats: RequestStats, end: Ending, arrived: float) -> dict[str, Any]:
    manifest = stats.manifest
    usage, cost = stats.usage, stats.cost()
    upstream = stats.upstream_seconds
    scope = stats.scope or ""
    _, mark, session = scope.partition(SESSION_SCOPE_MARK)
    return {
        "request_id": end.request_id,
        "time": arrived,
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


TOO_LARGE = RecordedBodies(b"", b"", -1)
"""What a record keeps of bodies over the policy's `records.max_body_bytes`: nothing."""


def _too_large(bodies: RecordedBodies) -> bool:
    return max(len(bodies.original), len(bodies.prepared)) > bodies.max_bytes


def _bodies(bodies: RecordedBodies | None) -> tuple[str, Any, Any]:
    """`off`, `too_large` or `kept` with both bodies (written as they are: valid JSON text)."""
    if bodies is None:
        return "off", None, None
    if _too_large(bodies):
        return "too_large", None, None
    return "kept", _json(bodies.original), _json(bodies.prepared)


def _json(raw: bytes) -> Any:
    """The body as JSON text to embed; one orjson does not read is kept as a string."""
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")
    return orjson.Fragment(raw)
