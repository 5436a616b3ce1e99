"""`store.write_budget` and `tenants[].write_budget`: defaults, null to disable, a tenant's keys
over the store's, strict keys, and the budgets the app gives its store in each auth mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxy.app import write_budgets
from proxy.artifacts.budgets import WriteBudget
from proxy.settings import ConfigError, Settings
from proxy.settings.loading import load_settings

MIB = 1024 * 1024
UPSTREAMS = [{"name": "up", "base_url": "http://127.0.0.1:9/v1"}]


def settings(**data: Any) -> Settings:
    return Settings.model_validate({"upstreams": UPSTREAMS, **data})


def test_no_normal_session_meets_the_default_budget() -> None:
    default = settings().store.write_budget
    assert (default.bytes_per_minute, default.max_live_bytes) == (64 * MIB, 512 * MIB)


def test_null_disables_a_budget_and_a_tenant_overrides_only_the_keys_it_sets() -> None:
    configured = settings(
        store={"write_budget": {"bytes_per_minute": None, "max_live_bytes": 100 * MIB}},
        auth={"mode": "keys"},
        tenants=[
            {"name": "big", "keys": ["k1"], "write_budget": {"max_live_bytes": 2048 * MIB}},
            {"name": "capped", "keys": ["k2"], "write_budget": {"bytes_per_minute": MIB}},
            {"name": "plain", "keys": ["k3"]},
        ],
    )
    assert configured.write_budget_for("big").bytes_per_minute is None
    assert configured.write_budget_for("big").max_live_bytes == 2048 * MIB
    assert configured.write_budget_for("capped").max_live_bytes == 100 * MIB
    budgets = write_budgets(configured)
    assert budgets.of("big") == WriteBudget(None, 2048 * MIB)
    assert budgets.of("capped") == WriteBudget(MIB, 100 * MIB)
    assert budgets.of("plain") == budgets.default == WriteBudget(None, 100 * MIB)


def test_in_passthrough_mode_every_credential_gets_the_passthrough_tenants_budget() -> None:
    configured = settings(
        tenants=[{"name": "default", "write_budget": {"max_live_bytes": MIB}}],
    )
    budgets = write_budgets(configured)
    assert budgets.of("default:0123456789abcdef") == WriteBudget(64 * MIB, MIB)
    assert dict(budgets.owners) == {}


@pytest.mark.parametrize(
    ("yaml", "problem"),
    [
        ("store:\n  write_budget: {bytes_per_minut: 1}\n", "store.write_budget.bytes_per_minut"),
        ("store:\n  write_budget: {max_live_bytes: 0}\n", "store.write_budget.max_live_bytes"),
        (
            "tenants:\n  - {name: a, write_budget: {live_bytes: 1}}\n",
            "tenants.0.write_budget.live_bytes",
        ),
        ('tenants:\n  - {name: "a\\0b"}\n', "tenants.0.name: must not contain a NUL character"),
    ],
)
def test_mistakes_name_the_key(tmp_path: Path, yaml: str, problem: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml + "upstreams: [{name: up, base_url: 'http://127.0.0.1:9/v1'}]\n")
    with pytest.raises(ConfigError, match=problem.replace(".", r"\.")):
        load_settings(path, {})
