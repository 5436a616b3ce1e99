"""Preparer: the policy resolved for the model, its tokenizer, budget and mode, and the calibrated
count ratio, as the manifest reports them."""

from __future__ import annotations

from pathlib import Path

from pipeline_harness import TENANT, agent_history, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.tokens.calibration_rule import AppliedRatio, CalibrationKey, RatioSource


class FixedRatio:
    """A calibration that has learned one ratio for every upstream, model and contributor."""

    def __init__(self) -> None:
        self.asked: list[tuple[CalibrationKey, str]] = []

    def applied(self, key: CalibrationKey, contributor: str) -> AppliedRatio:
        self.asked.append((key, contributor))
        return AppliedRatio(1.234567, RatioSource.own)


async def test_the_policys_tokenizer_counts_the_request(tmp_path: Path) -> None:
    write_policy(tmp_path, "extends: default\ncounting: {tokenizer: estimate}\n")
    body = {"model": "gpt-4o", "messages": agent_history(1, result_chars=200)}
    prepared = await make_harness(tmp_path, shared_counters()).prepare(body)
    assert prepared.manifest.counting_method == "estimate"


async def test_the_count_ratio_is_reported_to_four_places(tmp_path: Path) -> None:
    write_policy(tmp_path, "extends: default\n")
    ratios = FixedRatio()
    harness = make_harness(tmp_path, shared_counters(), calibration=ratios)
    body = {"model": "gpt-4o", "messages": agent_history(1, result_chars=200)}
    prepared = await harness.prepare(body)
    assert prepared.manifest.count_ratio == 1.2346
    assert prepared.manifest.count_ratio_source == "own"
    assert ratios.asked == [(CalibrationKey("", "gpt-4o"), TENANT.contributor)]


async def test_the_manifest_reports_the_budgets_trigger_and_target(tmp_path: Path) -> None:
    write_policy(
        tmp_path,
        "extends: default\nbudget: {context_window: 10000, reserved_output: 0, "
        "safety_margin: 0, trigger: 0.9, target: 0.6}\n",
    )
    body = {"model": "gpt-4o", "messages": agent_history(1, result_chars=200)}
    prepared = await make_harness(tmp_path, shared_counters()).prepare(body)
    m = prepared.manifest
    assert (m.allowance, m.trigger, m.target) == (10000, 9000, 6000)
    assert (m.policy, m.model, m.mode) == ("test", "gpt-4o", "window")


async def test_the_policy_is_resolved_for_the_requests_model(tmp_path: Path) -> None:
    write_policy(tmp_path, 'extends: default\nmodels:\n  "gpt-4o*":\n    mode: off\n')
    body = {"model": "gpt-4o", "messages": agent_history(1, result_chars=200)}
    raw = b'{"messages": [], "model": "gpt-4o"}'  # not its re-serialisation: mode off sends these
    harness = make_harness(tmp_path, shared_counters())
    prepared = await harness.preparer.prepare(body, raw, TENANT, OPENAI_CHAT)
    assert prepared.manifest.mode == "off"
    assert prepared.body is raw and prepared.changed is False and prepared.parsed is body
