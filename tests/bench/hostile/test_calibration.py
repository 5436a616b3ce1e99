"""The calibration run (bench/hostile/calibration.py): its replicas' config is valid, and its
fake upstream inflates the usage of tenant a's key only."""

from __future__ import annotations

import json
from pathlib import Path

from fakes import Recorded
from multidict import CIMultiDict
from shared_tokens import counter_for

from bench.hostile.calibration import UPSTREAM_KEYS, inflating, prompt, proxy_config
from proxy.settings import Settings


def test_the_replicas_share_one_redis_prefix_and_sync_quickly(tmp_path: Path) -> None:
    path = proxy_config(8000, "http://127.0.0.1:1/v1", "redis://x:6379/0", "p:", 0.2, tmp_path)
    settings = Settings.model_validate(json.loads(path.read_text()))
    assert (settings.store.kind, settings.store.key_prefix) == ("redis", "p:")
    assert settings.store.calibration_sync_s == 0.2
    assert [t.name for t in settings.tenants] == ["a", "b"]
    assert (tmp_path / "calib.yaml").read_text().startswith("extends: default")


def test_only_tenant_as_usage_is_inflated() -> None:
    body = prompt(1000)
    tokens = counter_for("gpt-4o").count_request(body)
    script = inflating(3.0)
    for tenant, expected in (("a", round(3 * tokens)), ("b", tokens)):
        headers = CIMultiDict({"Authorization": f"Bearer {UPSTREAM_KEYS[tenant]}"})
        record = Recorded("POST", "/v1/chat/completions", "", headers, json.dumps(body).encode())
        reply = script(record)
        assert reply.usage["prompt_tokens"] == expected  # type: ignore[attr-defined]
