"""Logging for `ctxproxy serve`: JSON or text lines, access logs, and key redaction.

* `JsonFormatter`: one JSON object per record (`ts`, `level`, `logger`, `message`, every `extra`
  field, `exc` when there is a traceback).
* `RedactingFilter`: defence in depth. The proxy never logs keys or Authorization headers on
  purpose; this filter (installed on the root handler) still masks `sk-...`-like tokens,
  `Bearer ...` values and `Authorization`/`api-key` header values in every record's message,
  arguments, string `extra` fields and traceback text.
* `access_log(...)`: the one line per request on the `ctxproxy.access` logger.
"""

from __future__ import annotations

import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from proxy.stats import RequestStats

ACCESS_LOGGER = "ctxproxy.access"
_access = logging.getLogger(ACCESS_LOGGER)
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
_TEXT_FORMAT_PID = "%(asctime)s [%(process)d] %(levelname)s %(name)s %(message)s"
MASK = "***"

_SECRETS = (
    # Authorization / api-key header values, in reprs of headers or dicts as well.
    re.compile(
        r"(?i)((?:proxy-)?authorization|x?-?api[-_]key|upstream_key)(['\"]?\s*[:=]\s*['\"]?)"
        r"(?:bearer\s+|basic\s+)?[^\s'\",;}\]]+"
    ),
    re.compile(r"(?i)\b(bearer)(\s+)[^\s'\",;}\]]+"),
    # OpenAI-style keys (sk-..., sk-proj-...) and similar.
    re.compile(r"\b(sk)(-)[A-Za-z0-9_\-]{6,}"),
)
# Everything a LogRecord has without `extra`; the rest are extra fields.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def redact(text: str) -> str:
    """`text` with keys and Authorization values masked."""
    for pattern in _SECRETS:
        text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return text


class RedactingFilter(logging.Filter):
    """Masks secrets in a record before any handler formats it (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to logging's own error report
            return True
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        for key, value in list(vars(record).items()):
            if key not in _STANDARD and isinstance(value, str):
                setattr(record, key, redact(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_JSON_VALUES = (str, int, float, bool, type(None), list, dict)


class JsonFormatter(logging.Formatter):
    """One JSON object per line; `extra` fields become top-level keys; with `pid`, the process
    id as `pid` (`--workers N`: which worker, or the supervisor, wrote the line)."""

    def __init__(self, pid: bool = False) -> None:
        super().__init__()
        self._pid = pid

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if self._pid:
            out["pid"] = record.process
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out and isinstance(value, _JSON_VALUES):
                out[key] = value  # a library's own record fields (sentinels, objects) stay out
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = record.stack_info
        return orjson.dumps(out, default=str).decode()


def configure_logging(
    level: str, log_format: Literal["json", "text"], *, pid: bool = False
) -> logging.Handler:
    """The root handler of `ctxproxy serve` (stderr), replacing any handler already there;
    `pid`: each line names its process (several processes write to one stderr)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter(pid))
    else:
        handler.setFormatter(logging.Formatter(_TEXT_FORMAT_PID if pid else _TEXT_FORMAT))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler


def access_fields(
    request_id: str, method: str, route: str, status: int, stats: RequestStats, duration_s: float
) -> dict[str, Any]:
    """The access line's fields (all JSON scalars)."""
    manifest = stats.manifest
    upstream = stats.upstream_seconds
    fields: dict[str, Any] = {
        "request_id": request_id,
        "method": method,
        "route": route,
        "status": status,
        "tenant": stats.tenant,
        "policy": stats.policy,
        "tokens_before": manifest.tokens_before if manifest is not None else None,
        "tokens_after": manifest.tokens_after if manifest is not None else None,
        "actions": manifest.action_summary() if manifest is not None else None,
        "outcome": manifest.outcome.value if manifest is not None else None,
        "duration_ms": round(duration_s * 1000, 2),
        "upstream_ms": None if upstream is None else round(upstream * 1000, 2),
    }
    _usage_fields(fields, stats)
    summary = manifest.summary() if manifest is not None else None
    if summary is not None:
        fields["summary"] = manifest.summary_label() if manifest is not None else None
        fields["summary_tokens"] = summary["tokens"]
        usage = summary.get("summarizer_usage") or {}
        if usage:
            fields["summarizer_ms"] = round(summary.get("seconds", 0.0) * 1000, 2)
            fields["summarizer_tokens"] = sum(v for k, v in usage.items() if k != "total_tokens")
    if stats.synthetic_rounds:
        fields["synthetic_rounds"] = stats.synthetic_rounds
        fields["artifact_reads"] = stats.artifact_reads
    if stats.error is not None:
        fields["error"] = stats.error
    if stats.reason is not None:
        fields["reason"] = stats.reason
    return fields


def _usage_fields(fields: dict[str, Any], stats: RequestStats) -> None:
    """The upstream's usage summed over the answers, and its cost (`price: unknown` when the
    model has no known price)."""
    usage = stats.usage
    if usage is None:
        return
    fields["input_tokens"] = usage.input
    if usage.cache_read is not None:
        fields["cached_tokens"] = usage.cache_read
    if usage.cache_write is not None:
        fields["cache_write_tokens"] = usage.cache_write
    fields["output_tokens"] = usage.output
    cost = stats.cost()
    if cost is None or stats.pricing is None:
        return
    prices = stats.pricing.prices
    fields["price"] = "unknown" if prices is None or cost.usd is None else prices.source
    if cost.usd is not None and cost.unchanged_usd is not None:
        fields["cost_usd"] = round(cost.usd, 10)
        fields["cost_unchanged_usd"] = round(cost.unchanged_usd, 10)


_PROBES = frozenset({"/", "/healthz", "/readyz", "/metrics"})
_CONSOLE = frozenset({"/ui", "/ui/", "/ui/{name}", "/v1/context/requests"})
"""The console's page and files, and the request list it polls every 2 s while open."""


def access_level(route: str, status: int) -> int:
    """INFO, or DEBUG for successful probes (load balancers poll them every second) and for the
    console's page and polling."""
    quiet = route in _PROBES or route in _CONSOLE
    return logging.DEBUG if quiet and status < 400 else logging.INFO


def access_logged(route: str, status: int) -> bool:
    """Whether the access line of this answer would be written (else its fields need not be
    gathered: with `log_level: WARNING` no access line is)."""
    return _access.isEnabledFor(access_level(route, status))


def access_log(fields: dict[str, Any]) -> None:
    """One line at `access_level`.

    The message reads well as text (an error answer shows its code and reason instead of the
    tokens it never got to); the fields are there for JSON."""
    message = "%s %s %s %d %.1fms tenant=%s policy=%s"
    args: list[Any] = [
        fields["request_id"],
        fields["method"],
        fields["route"],
        fields["status"],
        fields["duration_ms"],
        fields["tenant"],
        fields["policy"],
    ]
    if fields["tokens_before"] is not None:
        message += " tokens=%s->%s actions=%s outcome=%s"
        args += [fields[k] for k in ("tokens_before", "tokens_after", "actions", "outcome")]
    if "cost_usd" in fields:
        message += " cost_usd=%s unchanged=%s"
        args += [fields["cost_usd"], fields["cost_unchanged_usd"]]
    for name in ("error", "reason"):
        if name in fields:
            message += f" {name}=%s"
            args.append(fields[name])
    _access.log(access_level(fields["route"], fields["status"]), message, *args, extra=fields)
