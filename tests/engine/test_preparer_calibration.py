"""Preparer: the count ratio a request applies is the one learned for its upstream and its
contributor (or agreed by others), unless its policy pins one."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from multidict import CIMultiDict
from pipeline_harness import TENANT, client_bytes, make_harness, write_policy
from shared_tokens import shared_counters
from upstream_double import UpstreamDouble

from proxy.engine.manifest import Manifest, NoteCode
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.http.auth import Tenant
from proxy.settings import SESSION_SCOPE_MARK
from proxy.tokens.calibration import CountCalibration
from proxy.tokens.calibration_rule import CalibrationKey, RatioRule
from proxy.upstream.windows import ModelWindows

BODY = {"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}
ALLOWANCE = 8192 - 4096 - 163  # gpt-4: the window, the default reserve, the margin


def learned(ratio: float, upstream: str = "fake", tenant: Tenant = TENANT) -> CountCalibration:
    calibration = CountCalibration(RatioRule(min_samples=1))
    key = CalibrationKey(upstream, "gpt-4")
    calibration.observe(key, tenant.contributor, 1000, round(ratio * 1000))
    return calibration


async def manifest(
    tmp_path: Path, calibration: CountCalibration, tenant: Tenant = TENANT,
    upstream: str = "fake", body: dict[str, Any] = BODY,
) -> Manifest:  # fmt: skip
    harness = make_harness(tmp_path, shared_counters(), calibration=calibration)
    windows = ModelWindows().for_request(UpstreamDouble(name=upstream), CIMultiDict())
    preparer = harness.preparer
    prepared = await preparer.prepare(body, client_bytes(body), tenant, OPENAI_CHAT, windows)
    return prepared.manifest


async def test_a_request_applies_the_ratio_of_its_own_upstream_and_contributor(
    tmp_path: Path,
) -> None:
    write_policy(tmp_path, "extends: default\n")
    calibration = learned(1.1)
    m = await manifest(tmp_path, calibration)
    assert (m.count_ratio, m.count_ratio_source) == (1.1, "own")
    assert m.allowance == int(ALLOWANCE / 1.1) and m.note_codes == [NoteCode.counts_calibrated]
    assert m.notes == [
        "budget scaled by the upstream's count ratio 1.100 (usage.prompt_tokens over the proxy's "
        "counts, from this credential's own answers)"
    ]
    in_session = dataclasses.replace(TENANT, scope=f"{TENANT.scope}{SESSION_SCOPE_MARK}abc")
    assert (await manifest(tmp_path, calibration, in_session)).count_ratio == 1.1
    another = dataclasses.replace(TENANT, scope="t:another-credential")
    anonymous = dataclasses.replace(TENANT, scope="t:anonymous:1", anonymous=True)
    for tenant, upstream in ((another, "fake"), (anonymous, "fake"), (TENANT, "other")):
        m = await manifest(tmp_path, calibration, tenant, upstream)
        assert (m.count_ratio, m.count_ratio_source, m.allowance) == (1.0, "none", ALLOWANCE)
        assert m.note_codes in ([], [NoteCode.no_credential])


async def test_a_pinned_count_ratio_applies_whatever_was_learned(tmp_path: Path) -> None:
    write_policy(
        tmp_path,
        "extends: default\nbudget: {count_ratio: 1.25}\n"
        'models:\n  "gpt-4o*": {budget: {count_ratio: 1}}\n',
    )
    m = await manifest(tmp_path, learned(1.1))
    assert (m.count_ratio, m.count_ratio_source) == (1.25, "pinned")
    assert m.allowance == int(ALLOWANCE / 1.25)
    assert m.notes == ["budget scaled by the count ratio 1.250 pinned by the policy's budget"]
    body = {**BODY, "model": "gpt-4o"}
    calibration = CountCalibration(RatioRule(min_samples=1))
    calibration.observe(CalibrationKey("fake", "gpt-4o"), TENANT.contributor, 1000, 1500)
    m = await manifest(tmp_path, calibration, body=body)
    assert (m.count_ratio, m.count_ratio_source, m.note_codes) == (1.0, "pinned", [])


@pytest.mark.parametrize("pin", ["0", "5", "off", "-1", ".nan"])
async def test_a_pin_outside_0_25_to_4_is_refused(tmp_path: Path, pin: str) -> None:
    write_policy(tmp_path, f"extends: default\nbudget: {{count_ratio: {pin}}}\n")
    with pytest.raises(Exception, match="count_ratio"):
        make_harness(tmp_path, shared_counters())
