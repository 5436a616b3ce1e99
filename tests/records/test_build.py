"""A request's record from its stats: the summary, the detail, the outcome, the bodies."""

from __future__ import annotations

import orjson
import pytest

from proxy.engine.manifest import Action, CacheReport, Manifest, NoteCode, Outcome
from proxy.errors import RefusalReason
from proxy.records.build import Ending, PendingRecord, outcome, readable
from proxy.stats import Pricing, RecordedBodies, RequestStats, SyntheticCall, UpstreamCall
from proxy.tokens.prices import ModelPrices
from proxy.tokens.usage import TokenUsage

RID = "ab" * 16
PRICES = ModelPrices(2e-6, 8e-6, 1e-6, None, "config")


def manifest() -> Manifest:
    m = Manifest(policy="default", model="gpt-4o", mode="window", counting_method="tiktoken",
                 tokens_before=5000, tokens_after=1200, outcome=Outcome.reduced)  # fmt: skip
    m.actions.append(Action("offload_tool_results", "over", [2], 3000, ["art_" + "1" * 32]))
    m.actions.append(Action("drop_turns", "over", [3, 4], 800, detail={"turns": 1}))
    m.actions.append(Action("offload_tool_results", "over", [6], 20))
    m.note(NoteCode.window_fallback, "window unknown")
    m.cache = CacheReport("warm", 12.5, 300)
    return m


def ending(status: int = 200, headers: dict[str, str] | None = None) -> Ending:
    headers = headers or {"X-Ctxproxy-Policy": "default", "content-type": "application/json"}
    return Ending(RID, "/v1/chat/completions", "openai_chat", status, headers, 0.25, 1000.5)


def stats(**fields: object) -> RequestStats:
    s = RequestStats(tenant="acme", policy="default", scope="acme#session:" + "f" * 32)
    s.manifest, s.model = manifest(), "gpt-4o"
    for name, value in fields.items():
        setattr(s, name, value)
    return s


def test_the_summary() -> None:
    s = stats(stream=True)
    s.answers.append(TokenUsage(1200, 40, cache_read=1000))
    s.pricing = Pricing("fake", "gpt-4o", PRICES)
    s.upstream_calls.append(UpstreamCall("fake", 0.2))
    record = PendingRecord(s, ending())
    summary = record.summary
    assert record.request_id == RID and record.time == summary["time"] == 1000.25
    assert summary["tenant"] == "acme" and summary["session"] == "f" * 32
    assert summary["format"] == "openai_chat" and summary["stream"] is True
    assert (summary["tokens_before"], summary["tokens_after"]) == (5000, 1200)
    assert summary["actions"] == ["offload_tool_results", "drop_turns"]
    assert summary["usage"] == {"input_tokens": 1200, "cached_input_tokens": 1000,
                                "cache_write_tokens": None, "output_tokens": 40}  # fmt: skip
    cost = summary["cost"]
    assert cost["usd"] == pytest.approx(200 * 2e-6 + 1000 * 1e-6 + 40 * 8e-6)
    assert cost["saved_usd"] == pytest.approx(cost["unchanged_usd"] - cost["usd"])
    assert cost["saved_usd"] > 0
    assert summary["latency_ms"] == 250.0 and summary["upstream_ms"] == 200.0
    assert orjson.loads(orjson.dumps(summary)) == summary


def test_the_detail_reads_as_the_dry_run_manifest_from_either_store() -> None:
    s = stats()
    s.synthetic_calls.append(
        SyntheticCall(1, "read_context_artifact", '{"artifact_id": "art_x", "offset": 0}', 900)
    )
    s.synthetic_calls.append(SyntheticCall(1, "search_context_artifact", "not json", 10))
    detail = PendingRecord(s, ending()).detail
    expected = orjson.loads(orjson.dumps(manifest().as_dict()))
    in_memory = readable(dict(detail))  # the memory store keeps the objects
    assert orjson.loads(orjson.dumps(in_memory))["manifest"] == expected
    from_redis = readable(orjson.loads(orjson.dumps(detail)))  # Redis keeps its JSON
    assert from_redis["manifest"] == expected
    assert "detail" not in from_redis["manifest"]["actions"][0]
    assert from_redis["headers"] == {"x-ctxproxy-policy": "default"}
    assert from_redis["rounds"] == [
        {"round": 1, "tool": "read_context_artifact", "result_chars": 900,
         "arguments": {"artifact_id": "art_x", "offset": 0}, "artifact_id": "art_x"},
        {"round": 1, "tool": "search_context_artifact", "result_chars": 10,
         "arguments": "not json", "artifact_id": None},
    ]  # fmt: skip
    assert from_redis["bodies"] == "off" and from_redis["error"] is None


@pytest.mark.parametrize(
    ("original", "prepared", "most", "kept"),
    [
        (b'{"a": 1}', b'{"a":1,"b":[2]}', 100, "kept"),
        (b'{"a": 1}', b'{"b": "' + b"x" * 200 + b'"}', 100, "too_large"),
        (b'{"a": "' + b"x" * 200 + b'"}', b"{}", 100, "too_large"),
    ],
)
def test_bodies(original: bytes, prepared: bytes, most: int, kept: str) -> None:
    s = stats(bodies=RecordedBodies(original, prepared, most))
    record = PendingRecord(s, ending())
    if kept == "too_large":
        assert len(s.bodies.original) == 0  # type: ignore[union-attr]  # not held meanwhile
    detail = orjson.loads(orjson.dumps(record.detail))
    assert detail["bodies"] == kept
    if kept == "kept":
        assert detail["original"] == orjson.loads(original)
        assert detail["prepared"] == orjson.loads(prepared)
    else:
        assert detail["original"] is None and detail["prepared"] is None


def test_a_body_orjson_does_not_read_is_kept_as_text() -> None:
    s = stats(bodies=RecordedBodies(b'{"n": NaN}', b"{}", 100))
    detail = orjson.loads(orjson.dumps(PendingRecord(s, ending()).detail))
    assert detail["original"] == '{"n": NaN}' and detail["prepared"] == {}


def test_an_unprepared_request() -> None:
    s = RequestStats(tenant="acme", policy="default")
    s.model, s.error = "gpt-4o", "invalid_json"
    summary = PendingRecord(s, ending(400)).summary
    assert summary["tokens_before"] is None and summary["actions"] == []
    assert summary["model"] == "gpt-4o" and summary["session"] is None
    assert summary["usage"] is None and summary["cost"] is None
    assert summary["outcome"] == "error"


@pytest.mark.parametrize(
    ("status", "error", "reason", "expected"),
    [
        (200, None, None, "ok"),
        (499, None, None, "cancelled"),
        (400, "context_length_exceeded", RefusalReason.input_exceeds_allowance, "refused"),
        (503, "artifact_store_unavailable", RefusalReason.artifact_store_unavailable, "refused"),
        (429, None, None, "upstream_error"),
        (504, "upstream_timeout", None, "upstream_error"),
        (400, "invalid_json", None, "error"),
        (500, "internal_error", None, "error"),
    ],
)
def test_outcome(
    status: int, error: str | None, reason: RefusalReason | None, expected: str
) -> None:
    s = RequestStats()
    s.error, s.reason = error, reason
    assert outcome(s, status) == expected
