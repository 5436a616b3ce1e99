"""Manifest: the action summary, the dict form, and the response headers of a prepared request."""

from __future__ import annotations

from proxy.engine.cache_warmth import CacheApplied, CacheState
from proxy.engine.manifest import (
    Action,
    CacheReport,
    Manifest,
    NoteCode,
    Outcome,
    Prepared,
    SyntheticTools,
)
from proxy.jsonio import dumps


def manifest(*actions: Action) -> Manifest:
    return Manifest(
        policy="coding-agent",
        model="gpt-4o",
        mode="window",
        tokens_before=120_000,
        tokens_after=80_000,
        actions=list(actions),
    )


OFFLOAD = Action("offload_tool_results", "r", [3, 11], 900, ["a1", "a2"])
DROP = Action("drop_turns", "r", [2, 3, 4, 5, 6], 4000, ["a3"], count=2, unit="turns")


def test_action_summary_counts_each_steps_own_unit_in_order() -> None:
    assert manifest().action_summary() == "none"
    assert manifest(OFFLOAD).action_summary() == "offload_tool_results:2"
    assert manifest(DROP, OFFLOAD).action_summary() == "drop_turns:2,offload_tool_results:2"
    empty = Action("clear_tool_results", "r", [], 0)
    assert manifest(empty).action_summary() == "clear_tool_results:0"


def test_headers() -> None:
    reduced = manifest(OFFLOAD, DROP)
    reduced.outcome = Outcome.reduced
    prepared = Prepared(b"{}", True, reduced, {})
    assert prepared.headers() == {
        "x-ctxproxy-policy": "coding-agent",
        "x-ctxproxy-tokens-before": "120000",
        "x-ctxproxy-tokens-after": "80000",
        "x-ctxproxy-actions": "offload_tool_results:2,drop_turns:2",
        "x-ctxproxy-outcome": "reduced",
    }
    unchanged = Prepared(b"raw", False, Manifest("default", "m", "inspect"), {})
    assert unchanged.headers() == {
        "x-ctxproxy-policy": "default",
        "x-ctxproxy-tokens-before": "0",
        "x-ctxproxy-tokens-after": "0",
        "x-ctxproxy-actions": "none",
        "x-ctxproxy-outcome": "unchanged",
    }
    assert all(isinstance(v, str) for v in prepared.headers().values())


def test_as_dict_is_plain_data() -> None:
    m = manifest(OFFLOAD)
    m.notes.append("n")
    data = m.as_dict()
    assert data["actions"] == [
        {
            "step": "offload_tool_results",
            "reason": "r",
            "message_indices": [3, 11],
            "tokens_freed": 900,
            "artifact_ids": ["a1", "a2"],
            "count": 2,
            "unit": "items",
        }
    ]
    assert data["outcome"] == "unchanged" and data["notes"] == ["n"]
    assert list(data)[:3] == ["policy", "model", "mode"]
    data["actions"][0]["message_indices"].append(99)  # a copy: the manifest is not changed
    assert m.actions[0].message_indices == [3, 11]


def test_defaults_are_not_shared() -> None:
    a, b = Manifest("p", "m", "window"), Manifest("p", "m", "window")
    a.notes.append("x")
    a.actions.append(OFFLOAD)
    assert b.notes == [] and b.actions == []
    assert Action("s", "r", [], 0).artifact_ids == []


def test_prepared_synthetic_defaults_to_none() -> None:
    plain = Prepared(b"{}", True, manifest(), {})
    assert plain.synthetic is None
    tools = SyntheticTools(max_rounds=4, max_page_chars=20_000)
    assert Prepared(b"{}", True, manifest(), {}, synthetic=tools).synthetic == tools


def test_outcomes_are_typed_and_serialise_as_their_historical_names() -> None:
    assert Manifest("p", "m", "window").outcome is Outcome.unchanged
    reduced = Manifest("p", "m", "window", outcome=Outcome.reduced_above_target)
    assert b'"outcome":"reduced_above_target"' in dumps(reduced.as_dict())
    assert Outcome.nothing_reduced == "store_unavailable_kept"
    assert {o.value for o in Outcome} == {
        "unchanged",
        "inspected",
        "within_trigger",
        "within_allowance",
        "invalid_forwarded",
        "store_unavailable_kept",
        "reduced",
        "reduced_above_target",
    }


def test_notes_header_lists_fixed_codes_once_each() -> None:
    m = manifest()
    m.note(NoteCode.window_fallback, "context window 128000 is the fallback for 'secret-model'")
    m.note(NoteCode.estimated_tokens, "tokens estimated")
    m.note(NoteCode.window_fallback, "noted twice")
    headers = Prepared(b"{}", False, m, {}).headers()
    assert headers["x-ctxproxy-notes"] == "window_fallback,estimated_tokens"
    assert len(m.notes) == 2 and "secret-model" not in headers["x-ctxproxy-notes"]


def test_a_summary_is_reported_in_its_header_and_the_dict_form() -> None:
    detail = {"span": [2, 9], "kind": "extract", "by": "extract", "tokens": 210,
              "source": "fallback", "failure": "timeout", "seconds": 1.0,
              "summarizer_usage": {}}
    summarize = Action("summarize", "r", [2, 3], 700, ["a4"], 2, "turns", detail)
    m = manifest(OFFLOAD, summarize)
    assert m.summary() == detail
    assert m.summary_label() == "extract:fallback:timeout"
    headers = Prepared(b"{}", True, m, {}).headers()
    assert headers["x-ctxproxy-summary"] == "extract:fallback:timeout"
    assert [a.get("detail") for a in m.as_dict()["actions"]] == [None, detail]
    fresh = manifest(Action("summarize", "r", [2], 1, [], 1, "turns", {**detail,
                                                                      "source": "cache",
                                                                      "failure": None}))
    assert fresh.summary_label() == "extract:cache"
    assert "x-ctxproxy-summary" not in Prepared(b"{}", True, manifest(DROP), {}).headers()
    assert manifest(DROP).summary() is None and manifest(DROP).summary_label() is None


def test_the_cache_report_is_a_header_and_plain_data() -> None:
    m = manifest()
    assert "x-ctxproxy-cache" not in Prepared(b"{}", False, m, {}).headers()
    assert m.as_dict()["cache"] is None
    m.cache = CacheReport(CacheState.cold, 612.5, 300, CacheApplied.deeper_cut)
    assert Prepared(b"{}", False, m, {}).headers()["x-ctxproxy-cache"] == "cold:deeper_cut"
    data = m.as_dict()
    assert data["cache"] == {
        "state": "cold", "age_seconds": 612.5, "ttl_seconds": 300, "applied": "deeper_cut"
    }  # fmt: skip
    assert b'"cache":{"state":"cold","age_seconds":612.5' in dumps(data)
