"""The kept records summed up per tenant and policy."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.records.aggregate import aggregate


def summary(tenant: str, policy: str, time: float, **fields: Any) -> dict[str, Any]:
    return {"tenant": tenant, "policy": policy, "time": time, "outcome": "ok", "reason": None,
            "tokens_before": None, "tokens_after": None, "usage": None, "cost": None,
            **fields}  # fmt: skip


def usage(used: int, cached: int | None) -> dict[str, Any]:
    return {"input_tokens": used, "cached_input_tokens": cached, "output_tokens": 3}


def test_groups_sums_shares_and_series() -> None:
    stats = aggregate(
        [
            summary("acme", "p", 3.0, tokens_before=900, tokens_after=300, usage=usage(300, 200),
                    cost={"usd": 0.5, "unchanged_usd": 1.5, "saved_usd": 1.0}),
            summary("acme", "p", 1.0, tokens_before=100, tokens_after=100, usage=usage(100, None),
                    cost={"usd": None, "unchanged_usd": None, "saved_usd": None}),
            summary("acme", "p", 2.0, outcome="refused", reason="input_exceeds_allowance"),
            summary("globex", "default", 5.0),
            summary("acme", "q", 4.0),
        ]
    )  # fmt: skip
    assert stats["object"] == "context.stats"
    assert [(g["tenant"], g["policy"]) for g in stats["groups"]] == [
        ("acme", "p"), ("acme", "q"), ("globex", "default"),
    ]  # fmt: skip
    group = stats["groups"][0]
    assert group["requests"] == 3
    tokens = (group["tokens_before"], group["tokens_after"], group["tokens_saved"])
    assert tokens == (1000, 400, 600)
    assert (group["input_tokens"], group["cached_input_tokens"]) == (400, 200)
    assert group["cached_share"] == pytest.approx(0.5)
    assert group["cost_usd"] == 0.5 and group["saved_usd"] == 1.0
    assert group["refusals"] == {"input_exceeds_allowance": 1}
    assert [p["time"] for p in group["series"]] == [1.0, 2.0, 3.0]
    assert group["series"][2] == {"time": 3.0, "input_tokens": 300, "cached_input_tokens": 200,
                                  "tokens_before": 900, "tokens_after": 300}  # fmt: skip
    unpriced = stats["groups"][2]
    assert unpriced["cost_usd"] is None and unpriced["saved_usd"] is None
    assert unpriced["cached_share"] == 0.0 and unpriced["refusals"] == {}


def test_no_records() -> None:
    assert aggregate([]) == {"object": "context.stats", "groups": []}
