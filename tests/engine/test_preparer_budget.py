"""Preparer and budget: the refusal limit, where the window came from, and the notes about it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from multidict import CIMultiDict
from pipeline_harness import TENANT, Harness, agent_history, client_bytes, make_harness
from shared_tokens import shared_catalog, shared_counters
from upstream_double import UpstreamDouble, json_answer

from proxy.engine.manifest import NoteCode, Prepared
from proxy.engine.preparer import Preparer
from proxy.errors import ErrorCode, ProxyError, RefusalReason
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.policy.store import PolicyStore
from proxy.tokens.calibration import CountCalibration
from proxy.tokens.calibration_rule import CalibrationKey, RatioRule
from proxy.tokens.counters import TokenCounters
from proxy.upstream.windows import ModelWindows, RequestWindows


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


@pytest.fixture
def harness(tmp_path: Path, counters: TokenCounters) -> Harness:
    (tmp_path / "test.yaml").write_text("extends: default\n")  # the bundled default policy
    return make_harness(tmp_path, counters)


def prompt_of(counters: TokenCounters, model: str, tokens: int, **extra: Any) -> dict[str, Any]:
    """A one-message request for `model` counted at exactly `tokens` tokens."""
    counter = counters.for_model(model)

    def body(words: int) -> dict[str, Any]:
        text = "word " * words
        return {"model": model, "messages": [{"role": "user", "content": text}], **extra}

    words = tokens
    while counter.count_request(body(words)) > tokens:
        words -= 1
    assert counter.count_request(body(words)) == tokens
    return body(words)


async def prepare(
    harness: Harness, body: dict[str, Any], windows: RequestWindows | None = None
) -> Prepared:
    return await harness.preparer.prepare(body, client_bytes(body), TENANT, OPENAI_CHAT, windows)


async def test_gpt_4_prompt_over_the_reserve_but_within_the_window_is_forwarded(
    harness: Harness, counters: TokenCounters
) -> None:
    body = prompt_of(counters, "gpt-4", 4524)
    prepared = await prepare(harness, body)
    m = prepared.manifest
    assert (m.context_window, m.context_window_source) == (8192, "model_map")
    assert m.allowance < 4524 <= m.refusal_limit == 8192 - 256 - 163
    assert prepared.body == client_bytes(body) and m.outcome == "store_unavailable_kept"


async def test_gpt_4_prompt_with_max_tokens_4096_is_refused(
    harness: Harness, counters: TokenCounters
) -> None:
    body = prompt_of(counters, "gpt-4", 4524, max_tokens=4096)
    with pytest.raises(ProxyError) as caught:
        await prepare(harness, body)
    error = caught.value
    assert error.code is ErrorCode.context_length_exceeded
    assert error.reason is RefusalReason.protected_content_exceeds_allowance
    details = error.details or {}
    assert details["refusal_limit_tokens"] == details["allowance_tokens"] == 8192 - 4096 - 163
    assert "(4096 tokens are kept for the completion" in error.message


async def test_reject_mode_forwards_up_to_the_refusal_limit(
    tmp_path: Path, counters: TokenCounters
) -> None:
    (tmp_path / "test.yaml").write_text("extends: default\nmode: reject\n")
    harness = make_harness(tmp_path, counters)
    prepared = await prepare(harness, prompt_of(counters, "gpt-4", 4524))
    assert prepared.manifest.outcome == "within_allowance"
    with pytest.raises(ProxyError) as caught:
        await prepare(harness, prompt_of(counters, "gpt-4", 7774))
    assert caught.value.reason is RefusalReason.input_exceeds_allowance
    details = caught.value.details or {}
    assert details["protected_tokens"] == details["final_tokens"] == 7774  # no step removes any


async def test_a_reduced_request_may_stay_above_the_allowance_but_not_above_the_limit(
    tmp_path: Path, counters: TokenCounters
) -> None:
    (tmp_path / "test.yaml").write_text(
        "extends: default\nbudget: {context_window: 20000, safety_margin: 0}\n"
    )
    harness = make_harness(tmp_path, counters)
    # Old tool results can go, the newest question cannot: the result lands between the two.
    history = agent_history(3, result_chars=30_000)
    history.append({"role": "user", "content": "word " * 17_000})
    prepared = await prepare(harness, {"model": "gpt-4o", "messages": history})
    m = prepared.manifest
    assert m.allowance < m.tokens_after <= m.refusal_limit
    assert m.outcome == "reduced_above_target" and m.actions


async def test_an_unknown_model_is_noted_with_fixed_codes(harness: Harness) -> None:
    body = {"model": "my-local-llm", "messages": [{"role": "user", "content": "hi"}]}
    m = (await prepare(harness, body)).manifest
    assert (m.context_window, m.context_window_source) == (128_000, "fallback")
    assert m.note_codes == [NoteCode.window_fallback, NoteCode.estimated_tokens]
    assert len(m.notes) == 2 and "fallback_context_window" in m.notes[0]
    headers = Prepared(b"", False, m, body).headers()
    assert headers["x-ctxproxy-notes"] == "window_fallback,estimated_tokens"


async def test_an_unknown_model_takes_its_window_from_the_upstream(harness: Harness) -> None:
    listing = {"object": "list", "data": [{"id": "my-local-llm", "max_model_len": 4096}]}
    upstream = UpstreamDouble(json_answer(listing), json_answer({"error": "no"}, status=404))
    windows = ModelWindows().for_request(upstream, CIMultiDict())
    body = {"model": "my-local-llm", "messages": [{"role": "user", "content": "hi"}]}
    m = (await prepare(harness, body, windows)).manifest
    assert (m.context_window, m.context_window_source) == (4096, "upstream")
    assert m.note_codes == [NoteCode.window_upstream, NoteCode.estimated_tokens]
    assert [c.path for c in upstream.calls] == ["/models", "/props"]


async def test_a_known_model_does_not_ask_the_upstream(harness: Harness) -> None:
    upstream = UpstreamDouble()  # any call would fail: nothing is scripted
    windows = ModelWindows().for_request(upstream, CIMultiDict())
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    m = (await prepare(harness, body, windows)).manifest
    assert (m.context_window_source, m.note_codes, upstream.calls) == ("model_map", [], [])


async def test_a_stated_window_is_noted_as_a_correction(harness: Harness) -> None:
    model_windows = ModelWindows()
    model_windows.record_stated("fake", "gpt-4o", 30_000)
    windows = model_windows.for_request(UpstreamDouble(), CIMultiDict())
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    m = (await prepare(harness, body, windows)).manifest
    assert (m.context_window, m.context_window_source) == (30_000, "upstream_error")
    assert m.note_codes == [NoteCode.window_corrected]


async def test_a_calibrated_model_has_its_budget_scaled_and_noted(
    tmp_path: Path, counters: TokenCounters
) -> None:
    (tmp_path / "test.yaml").write_text("extends: default\n")
    calibration = CountCalibration(RatioRule(min_samples=1))
    calibration.observe(CalibrationKey("", "gpt-4"), TENANT.contributor, 1000, 1100)
    harness = make_harness(tmp_path, counters)
    harness.preparer = Preparer(
        policies=PolicyStore.load(tmp_path),
        counters=counters,
        catalog=shared_catalog(),
        store=harness.store,
        calibration=calibration,
    )
    m = (await prepare(harness, prompt_of(counters, "gpt-4", 1000))).manifest
    assert m.count_ratio == 1.1 and m.note_codes == [NoteCode.counts_calibrated]
    assert m.refusal_limit == int((8192 - 256 - 163) / 1.1)
    with pytest.raises(ProxyError):  # fits the proxy's count, not the upstream's
        await prepare(harness, prompt_of(counters, "gpt-4", 7773))


RECENT_PROTECTED = """extends: default
budget: {context_window: 20000, safety_margin: 0}
steps:
  - {kind: clear_tool_results, keep_recent_exchanges: 1, clear_recent_before_refusing: true}
"""


def with_last_result(counters: TokenCounters, result_tokens: int) -> dict[str, Any]:
    """An agent history whose newest tool result is about `result_tokens` long."""
    messages = agent_history(3, result_chars=2000)
    last_tool = max(i for i, m in enumerate(messages) if m["role"] == "tool")
    messages[last_tool]["content"] = "lorem ipsum " * (result_tokens // 2)
    return {"model": "gpt-4o", "messages": messages}


async def test_the_newest_result_is_cleared_only_to_avoid_a_refusal(
    tmp_path: Path, counters: TokenCounters
) -> None:
    (tmp_path / "test.yaml").write_text(RECENT_PROTECTED)
    harness = make_harness(tmp_path, counters)
    body = with_last_result(counters, 17_000)  # over the allowance (15,904), within the limit
    m = (await prepare(harness, body)).manifest
    assert m.allowance < m.tokens_after <= m.refusal_limit
    assert not any("last resort" in note for note in m.notes)
    body = with_last_result(counters, 21_000)  # over the limit: the last resort applies
    m = (await prepare(harness, body)).manifest
    assert m.tokens_after <= m.allowance
    assert any("last resort" in note for note in m.notes)


async def test_a_prompt_over_the_refusal_limit_but_under_the_trigger_is_reduced(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """The policy reserves 512 tokens, the request asks for 3,000: the provider would refuse a
    prompt over window - 3,000, the trigger is higher. Such a prompt is reduced to fit (before,
    it went upstream unchanged, to be refused there)."""
    (tmp_path / "test.yaml").write_text(
        "extends: default\n"
        "budget: {context_window: 8000, reserved_output: 512, safety_margin: 0}\n"
    )
    harness = make_harness(tmp_path, counters)
    history = agent_history(5, result_chars=3000)
    body = {"model": "gpt-4o", "messages": history, "max_tokens": 3000}
    m = (await prepare(harness, body)).manifest
    assert m.refusal_limit == 5000 < m.tokens_before <= m.trigger
    assert m.actions and m.tokens_after <= m.refusal_limit
