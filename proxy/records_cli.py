"""`ctxproxy requests`: a running proxy's request records in the terminal (a table), over HTTP
with a proxy key: the list (`GET /v1/context/requests`) or one record (`requests show ID`);
`--json` prints the answer as it came."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any, TextIO

DEFAULT_URL = "http://127.0.0.1:8531"
TIMEOUT_S = 30.0
FILTERS = ("status", "outcome", "model", "session", "tenant", "limit", "before")
EXIT_FAILED = 1


def _common(suppressed: bool) -> argparse.ArgumentParser:
    """--url, --key, --json; `suppressed`: without defaults (`show` keeps what `requests`
    was given before it)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppressed else value

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url", default=default(os.environ.get("CTXPROXY_URL", DEFAULT_URL)),
        help=f"the proxy (default: $CTXPROXY_URL or {DEFAULT_URL})",
    )  # fmt: skip
    common.add_argument("--key", default=default(os.environ.get("CTXPROXY_KEY")),
                        help="a proxy key (default: $CTXPROXY_KEY)")  # fmt: skip
    common.add_argument("--json", action="store_true", default=default(False),
                        help="print the raw JSON answer")  # fmt: skip
    return common


def add_parser(sub: Any) -> None:
    """The `requests` command and its `show` subcommand."""
    requests = sub.add_parser("requests", parents=[_common(False)], help="a proxy's records")
    requests.add_argument("--status", type=int, help="HTTP status, e.g. 200 or 400")
    requests.add_argument(
        "--outcome", choices=("ok", "refused", "upstream_error", "error", "cancelled")
    )
    requests.add_argument("--model", help="the request's model (exact)")
    requests.add_argument("--session", help="the session value the client sent")
    requests.add_argument("--tenant", help="a tenant's records (operator keys only)")
    requests.add_argument("--limit", type=int, help="how many (default 50, at most 200)")
    requests.add_argument("--before", help="the records older than this request id")
    shown = requests.add_subparsers(dest="requests_command")
    show = shown.add_parser("show", parents=[_common(True)], help="one whole record")
    show.add_argument("request_id")


def run_requests(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if getattr(args, "requests_command", None) == "show":
        path = f"/v1/context/requests/{urllib.parse.quote(args.request_id, safe='')}"
    else:
        query = {name: getattr(args, name) for name in FILTERS if getattr(args, name) is not None}
        path = "/v1/context/requests" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    try:
        answer = fetch(args.url, path, args.key)
    except RequestFailed as exc:
        print(f"ctxproxy requests: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        out.write(json.dumps(answer, indent=2, ensure_ascii=False) + "\n")
    elif getattr(args, "requests_command", None) == "show":
        render_record(answer, out)
    else:
        render_list(answer, out)
    return 0


class RequestFailed(Exception):
    """The proxy could not be reached, or answered with an error (the message says which)."""


def fetch(url: str, path: str, key: str | None) -> Any:
    request = urllib.request.Request(url.rstrip("/") + path)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise RequestFailed(f"{exc.code}: {_error_message(exc.read())}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RequestFailed(f"cannot reach {url}: {reason}") from exc
    except ValueError as exc:
        raise RequestFailed(f"{url} did not answer JSON") from exc


def _error_message(raw: bytes) -> str:
    try:
        error = json.loads(raw)["error"]
        return f"{error['message']} ({error.get('code')})"
    except (ValueError, KeyError, TypeError):
        return raw.decode("utf-8", "replace")[:200]


def _when(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _cost(cost: Any) -> str:
    if not isinstance(cost, dict) or cost.get("usd") is None:
        return "-"
    saved = cost.get("saved_usd")
    return f"${cost['usd']:.4f}" + (f" (-${saved:.4f})" if isinstance(saved, float) else "")


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")


def render_list(answer: dict[str, Any], out: TextIO) -> None:
    rows = [["TIME", "REQUEST ID", "TENANT", "MODEL", "FORMAT", "STATUS", "OUTCOME", "TOKENS",
             "ROUNDS", "MS", "COST"]]  # fmt: skip
    for r in answer.get("data", []):
        tokens = f"{_or_dash(r.get('tokens_before'))} -> {_or_dash(r.get('tokens_after'))}"
        outcome = r.get("outcome", "-") + (f" ({r['reason']})" if r.get("reason") else "")
        rows.append([
            _when(r.get("time")), str(r.get("request_id")), str(r.get("tenant")),
            str(r.get("model")), str(r.get("format")), str(r.get("status")), outcome, tokens,
            str(r.get("synthetic_rounds", 0)), _or_dash(r.get("latency_ms")), _cost(r.get("cost")),
        ])  # fmt: skip
    _table(rows, out)
    if answer.get("has_more") and answer.get("data"):
        out.write(f"... more: --before {answer['data'][-1]['request_id']}\n")


def render_record(record: dict[str, Any], out: TextIO) -> None:
    usage = record.get("usage") or {}
    rows = [
        ("request id", record.get("request_id")), ("time", _when(record.get("time"))),
        ("tenant", record.get("tenant")), ("session", record.get("session")),
        ("route", record.get("route")), ("model", record.get("model")),
        ("policy", record.get("policy")), ("stream", record.get("stream")),
        ("status", record.get("status")), ("outcome", record.get("outcome")),
        ("reason", record.get("reason")),
        ("tokens", f"{_or_dash(record.get('tokens_before'))} -> "
                   f"{_or_dash(record.get('tokens_after'))}"),
        ("actions", ", ".join(record.get("actions") or []) or "-"),
        ("usage", f"input {_or_dash(usage.get('input_tokens'))}, cached "
                  f"{_or_dash(usage.get('cached_input_tokens'))}, output "
                  f"{_or_dash(usage.get('output_tokens'))}" if usage else "-"),
        ("cost", _cost(record.get("cost"))),
        ("latency ms", f"{_or_dash(record.get('latency_ms'))} (upstream "
                       f"{_or_dash(record.get('upstream_ms'))})"),
        ("bodies", record.get("bodies")),
    ]  # fmt: skip
    _table([[name, _or_dash(value)] for name, value in rows], out)
    rounds = record.get("rounds") or []
    if rounds:
        out.write("\nsynthetic calls:\n")
        table = [["ROUND", "TOOL", "ARTIFACT", "RESULT CHARS", "ARGUMENTS"]]
        for call in rounds:
            arguments = json.dumps(call.get("arguments"), ensure_ascii=False)
            table.append([str(call.get("round")), str(call.get("tool")),
                          _or_dash(call.get("artifact_id")), str(call.get("result_chars")),
                          arguments[:80]])  # fmt: skip
        _table(table, out)
    headers = record.get("headers") or {}
    if headers:
        out.write("\nheaders:\n")
        _table([[name, str(value)] for name, value in sorted(headers.items())], out)
