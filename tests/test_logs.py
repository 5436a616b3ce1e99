"""`proxy.logs`: redaction, the JSON formatter, `ctxproxy serve`'s set-up, and access lines."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fakes import FakeUpstream, completion
from synthetic_harness import SyntheticProxies, calling, conversation, read_call

from proxy import cli
from proxy.logs import (
    ACCESS_LOGGER,
    JsonFormatter,
    RedactingFilter,
    access_logged,
    configure_logging,
    redact,
)

KEY = "sk-proj-AbC123xyz789DEF"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key={KEY}", "key=sk-***"),
        (f"Authorization: Bearer {KEY}", "Authorization: ***"),
        ("authorization='Basic dXNlcjpwdw=='", "authorization='***'"),
        ("{'Authorization': 'Bearer abc', 'x': 1}", "{'Authorization': '***', 'x': 1}"),
        ("got bearer tok.en-123 back", "got bearer *** back"),
        ('{"api-key": "abcdef"}', '{"api-key": "***"}'),
        ("upstream_key=xyz123", "upstream_key=***"),
        ("task-abcdefgh risk-assessment sk-short", "task-abcdefgh risk-assessment sk-short"),
        ("nothing secret here", "nothing secret here"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def record(msg: str, *args: Any, **extra: Any) -> logging.LogRecord:
    rec = logging.LogRecord("ctxproxy.test", logging.WARNING, __file__, 1, msg, args or None, None)
    for key, val in extra.items():
        setattr(rec, key, val)
    return rec


def test_filter_masks_message_args_extras_and_tracebacks() -> None:
    flt = RedactingFilter()
    rec = record("headers %s, count %d", {"Authorization": f"Bearer {KEY}"}, 3, note=KEY)
    assert flt.filter(rec) is True
    assert KEY not in rec.getMessage() and "count 3" in rec.getMessage()
    assert rec.note == "sk-***"  # type: ignore[attr-defined]
    kept = record("count %d", 5)
    flt.filter(kept)
    assert kept.args == (5,)  # nothing to mask: the record is left as it was
    try:
        raise RuntimeError(f"upstream said Bearer {KEY}")
    except RuntimeError:
        rec = record("failed")
        rec.exc_info = sys.exc_info()
    flt.filter(rec)
    assert rec.exc_text is not None and KEY not in rec.exc_text
    assert KEY not in logging.Formatter().format(rec)


def test_json_formatter() -> None:
    rec = record("hello %s", "world", request_id="abc", status=200)
    line = json.loads(JsonFormatter().format(rec))
    assert line["message"] == "hello world" and line["level"] == "WARNING"
    assert line["logger"] == "ctxproxy.test" and line["ts"].endswith("+00:00")
    assert line["request_id"] == "abc" and line["status"] == 200
    assert "args" not in line and "msg" not in line
    try:
        raise ValueError("boom")
    except ValueError:
        rec = record("failed")
        rec.exc_info = sys.exc_info()
    assert "ValueError: boom" in json.loads(JsonFormatter().format(rec))["exc"]


@pytest.fixture
def root_handlers() -> Iterator[None]:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved:
        root.addHandler(handler)
    root.setLevel(level)


@pytest.mark.usefixtures("root_handlers")
def test_configure_logging_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    handler = configure_logging("INFO", "json")
    assert isinstance(handler.formatter, JsonFormatter)
    assert any(isinstance(f, RedactingFilter) for f in handler.filters)
    logging.getLogger("ctxproxy.x").info("key %s", KEY)
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["message"] == "key sk-***"
    configure_logging("WARNING", "text")
    logging.getLogger("ctxproxy.x").warning("Authorization: Bearer %s", KEY)
    err = capsys.readouterr().err
    assert "WARNING ctxproxy.x Authorization: ***" in err and KEY not in err


@pytest.mark.usefixtures("root_handlers")
def test_serve_configures_json_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    from proxy.http import server

    monkeypatch.setattr(server, "run_app", lambda *args, **kwargs: None)
    assert cli.main(["serve"]) == 0
    [handler] = logging.getLogger().handlers
    assert isinstance(handler.formatter, JsonFormatter)


async def test_one_access_line_per_request(
    fake_upstream: FakeUpstream, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=ACCESS_LOGGER)
    proxies = SyntheticProxies(fake_upstream, tmp_path)
    proxy = await proxies.start()
    fake_upstream.enqueue_many(calling(read_call(0, 30)), completion("ok"))
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(
                f"{proxy.base_url}/chat/completions",
                json=conversation(),
                headers={"Authorization": f"Bearer {KEY}"},
            ) as response:
                assert response.status == 200
                request_id = response.headers["x-ctxproxy-request-id"]
            async with session.get(f"{proxy.url}/healthz") as response:
                health_id = response.headers["x-ctxproxy-request-id"]
            for method in ("HEAD", "GET"):  # what Claude Code sends first
                async with session.request(method, f"{proxy.url}/") as response:
                    assert response.status == 200
                    text = await response.text()
                    assert ("ctxproxy" in text) is (method == "GET")
    finally:
        await proxies.stop_all()
    lines = [r for r in caplog.records if r.name == ACCESS_LOGGER]
    assert len(lines) == 4
    # a successful probe is logged at DEBUG: load balancers poll it every second
    assert [r.levelno for r in lines] == [logging.INFO] + [logging.DEBUG] * 3
    chat, health, *roots = (json.loads(JsonFormatter().format(r)) for r in lines)
    assert [(r["method"], r["route"], r["status"]) for r in roots] == [
        ("HEAD", "/", 200),
        ("GET", "/", 200),
    ]
    assert "outcome=reduced actions" not in lines[0].getMessage()
    message = lines[0].getMessage()
    assert "actions=offload_tool_results:1 outcome=reduced cost_usd=" in message
    assert chat["outcome"] == "reduced" and health["outcome"] is None
    assert chat["request_id"] == request_id and health["request_id"] == health_id
    assert chat["method"] == "POST" and chat["route"] == "/v1/chat/completions"
    assert (chat["status"], chat["tenant"], chat["policy"]) == (200, "default", "small")
    assert chat["tokens_before"] > chat["tokens_after"] > 0
    assert chat["actions"] == "offload_tool_results:1"
    assert chat["synthetic_rounds"] == 1 and chat["artifact_reads"] == 1
    assert chat["duration_ms"] >= chat["upstream_ms"] > 0
    assert health["route"] == "/healthz" and health["upstream_ms"] is None
    assert "synthetic_rounds" not in health and health["tenant"] == "-"
    assert all(KEY not in json.dumps(line) for line in (chat, health))


async def test_a_refusal_access_line_shows_the_error_and_its_reason(
    fake_upstream: FakeUpstream, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=ACCESS_LOGGER)
    proxies = SyntheticProxies(fake_upstream, tmp_path)
    proxy = await proxies.start()
    refused = {"model": "gpt-4o", "messages": [{"role": "user", "content": "word " * 6000}]}
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(
                f"{proxy.base_url}/chat/completions",
                json=refused,
                headers={"Authorization": f"Bearer {KEY}"},
            ) as response:
                assert response.status == 400
            async with session.get(f"{proxy.base_url}/context/artifacts/art_0") as response:
                assert response.status == 404
    finally:
        await proxies.stop_all()
    chat, missing = [r for r in caplog.records if r.name == ACCESS_LOGGER]
    fields = json.loads(JsonFormatter().format(chat))
    assert fields["error"] == "context_length_exceeded"
    assert fields["reason"] == "protected_content_exceeds_allowance"
    message = chat.getMessage()
    assert "error=context_length_exceeded reason=protected_content_exceeds_allowance" in message
    assert "None" not in message
    assert "error=artifact_not_found" in missing.getMessage()
    assert "reason" not in missing.getMessage()


@pytest.mark.parametrize(
    ("level", "chat", "probe", "failed_probe"),
    [
        (logging.DEBUG, True, True, True),
        (logging.INFO, True, False, True),
        (logging.WARNING, False, False, False),
    ],
)
def test_access_lines_are_gathered_only_when_they_would_be_written(
    level: int, chat: bool, probe: bool, failed_probe: bool
) -> None:
    access = logging.getLogger(ACCESS_LOGGER)
    before = access.level
    access.setLevel(level)
    try:
        assert access_logged("/v1/chat/completions", 200) is chat
        assert access_logged("/healthz", 200) is probe
        assert access_logged("/readyz", 503) is failed_probe
        # the console's files and the list it polls are as quiet as a probe
        assert access_logged("/ui/{name}", 200) is probe
        assert access_logged("/v1/context/requests", 200) is probe
        assert access_logged("/v1/context/requests", 401) is failed_probe
        assert access_logged("/v1/context/requests/{request_id}", 200) is chat
    finally:
        access.setLevel(before)


def test_the_access_line_carries_the_summary() -> None:
    from proxy.engine.manifest import Action, Manifest
    from proxy.logs import access_fields
    from proxy.stats import RequestStats

    detail = {"span": [2, 9], "kind": "llm", "by": "m", "tokens": 300, "source": "fresh",
              "failure": None, "seconds": 0.5,
              "summarizer_usage": {"prompt_tokens": 90, "completion_tokens": 10,
                                   "total_tokens": 100}}
    manifest = Manifest(policy="p", model="m", mode="compact")
    manifest.actions = [Action("summarize", "r", [2], 100, ["a"], 1, "turns", detail)]
    stats = RequestStats()
    stats.manifest = manifest
    fields = access_fields("r1", "POST", "/v1/chat/completions", 200, stats, 1.0)
    assert (fields["summary"], fields["summary_tokens"]) == ("llm:fresh", 300)
    assert (fields["summarizer_ms"], fields["summarizer_tokens"]) == (500.0, 100)
    stats.manifest = Manifest(policy="p", model="m", mode="window")
    assert "summary" not in access_fields("r2", "POST", "/x", 200, stats, 1.0)


def test_the_access_line_carries_usage_and_cost() -> None:
    from proxy.engine.manifest import Manifest
    from proxy.logs import access_fields
    from proxy.stats import Pricing, RequestStats
    from proxy.tokens.prices import ModelPrices
    from proxy.tokens.usage import TokenUsage

    stats = RequestStats()
    stats.manifest = Manifest(policy="p", model="m", mode="window")
    fields = access_fields("r0", "POST", "/v1/messages", 200, stats, 1.0)
    assert "input_tokens" not in fields and "cost_usd" not in fields  # no usage reported
    stats.answers = [TokenUsage(3_000, 20, 2_000, 500)]
    stats.pricing = Pricing("claude", "m", ModelPrices(1e-6, 5e-6, 1e-7, 1.25e-6, "config"))
    fields = access_fields("r1", "POST", "/v1/messages", 200, stats, 1.0)
    assert (fields["input_tokens"], fields["cached_tokens"]) == (3_000, 2_000)
    assert (fields["cache_write_tokens"], fields["output_tokens"]) == (500, 20)
    expected = 500 * 1e-6 + 2_000 * 1e-7 + 500 * 1.25e-6 + 20 * 5e-6
    assert fields["price"] == "config"
    assert fields["cost_usd"] == pytest.approx(expected)
    assert fields["cost_unchanged_usd"] == pytest.approx(expected)  # nothing was counted
    stats.pricing = Pricing("claude", "m", None)
    fields = access_fields("r2", "POST", "/v1/messages", 200, stats, 1.0)
    assert fields["price"] == "unknown" and "cost_usd" not in fields


def test_a_librarys_own_record_fields_stay_out_of_the_json_line() -> None:
    """litellm put `litellm_redacted: <object object at 0x...>` on its records."""
    args = ("LiteLLM", logging.WARNING, __file__, 1, "provider said %s", ("no",), None)
    record = logging.LogRecord(*args)
    record.litellm_redacted = object()
    record.request_id = "r1"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "provider said no" and line["request_id"] == "r1"
    assert "litellm_redacted" not in line


@pytest.mark.usefixtures("root_handlers")
def test_several_processes_name_themselves_in_each_line() -> None:
    record = logging.LogRecord("ctxproxy", logging.INFO, __file__, 1, "hello", None, None)
    assert json.loads(JsonFormatter(pid=True).format(record))["pid"] == os.getpid()
    assert "pid" not in json.loads(JsonFormatter().format(record))
    handler = configure_logging("INFO", "text", pid=True)
    assert f"[{os.getpid()}] INFO ctxproxy hello" in handler.format(record)
