"""`ctxproxy requests`' tables (the HTTP side runs in tests/e2e/test_e2e_records_cli.py)."""

from __future__ import annotations

import io

from proxy.cli import _parser
from proxy.records_cli import render_list, render_record

SUMMARY = {
    "request_id": "ab" * 16, "time": 1764870000.1, "tenant": "acme", "model": "gpt-4o",
    "format": "openai_chat", "status": 400, "outcome": "refused",
    "reason": "input_exceeds_allowance", "tokens_before": 9000, "tokens_after": None,
    "synthetic_rounds": 0, "latency_ms": 12.5,
    "cost": {"usd": 0.0123, "unchanged_usd": 0.02, "saved_usd": 0.0077},
}  # fmt: skip


def test_the_list() -> None:
    out = io.StringIO()
    render_list({"data": [SUMMARY], "has_more": True}, out)
    header, row, more = out.getvalue().splitlines()
    assert header.split()[:3] == ["TIME", "REQUEST", "ID"]
    assert "ab" * 16 in row and "refused (input_exceeds_allowance)" in row
    assert "9000 -> -" in row and "$0.0123 (-$0.0077)" in row
    assert more == f"... more: --before {'ab' * 16}"


def test_one_record() -> None:
    out = io.StringIO()
    record = {**SUMMARY, "usage": None, "headers": {"x-ctxproxy-policy": "default"},
              "rounds": [{"round": 1, "tool": "read_context_artifact", "artifact_id": "art_1",
                          "result_chars": 900, "arguments": {"offset": 0}}]}  # fmt: skip
    render_record(record, out)
    text = out.getvalue()
    assert "outcome     refused" in text and "usage       -" in text
    assert "read_context_artifact  art_1" in text and '{"offset": 0}' in text
    assert "x-ctxproxy-policy  default" in text


def test_options_before_and_after_show() -> None:
    args = _parser().parse_args(["requests", "--key", "K", "--url", "http://x", "show", "id1"])
    assert (args.key, args.url, args.request_id, args.json) == ("K", "http://x", "id1", False)
    args = _parser().parse_args(["requests", "show", "id1", "--json", "--key", "Z"])
    assert (args.key, args.json) == ("Z", True)
    args = _parser().parse_args(["requests", "--status", "400", "--limit", "5"])
    assert (args.status, args.limit, args.requests_command) == (400, 5, None)
