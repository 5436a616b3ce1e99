"""Preparer: the policy's tokenizer and the calibrated count ratio, as the manifest reports them."""

from __future__ import annotations

from pathlib import Path

from pipeline_harness import agent_history, make_harness, write_policy

from proxy.tokens.counters import TokenCounters


class FixedRatio:
    """A calibration that has learned one ratio for every model."""

    def ratio(self, model: str) -> float:
        return 1.234567


async def test_the_policys_tokenizer_counts_the_request(tmp_path: Path) -> None:
    write_policy(tmp_path, "extends: default\ncounting: {tokenizer: estimate}\n")
    body = {"model": "gpt-4o", "messages": agent_history(1, result_chars=200)}
    prepared = await make_harness(tmp_path, TokenCounters()).prepare(body)
    assert prepared.manifest.counting_method == "estimate"


async def test_the_count_ratio_is_reported_to_four_places(tmp_path: Path) -> None:
    write_policy(tmp_path, "extends: default\n")
    harness = make_harness(tmp_path, TokenCounters(), calibration=FixedRatio())
    body = {"model": "gpt-4o", "messages": agent_history(1, result_chars=200)}
    prepared = await harness.prepare(body)
    assert prepared.manifest.count_ratio == 1.2346
