"""The kept records summed up per tenant and policy (`GET /v1/context/stats`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _add(total: float | None, value: Any) -> float | None:
    if not isinstance(value, int | float):
        return total
    return (total or 0.0) + value


class _Group:
    def __init__(self, tenant: str, policy: str) -> None:
        self.tenant, self.policy = tenant, policy
        self.requests = self.before = self.after = self.input = self.cached = 0
        self.cost: float | None = None
        self.saved: float | None = None
        self.refusals: Counter[str] = Counter()
        self.series: list[dict[str, Any]] = []

    def add(self, summary: Mapping[str, Any]) -> None:
        usage = summary.get("usage") or {}
        cost = summary.get("cost") or {}
        before, after = _int(summary.get("tokens_before")), _int(summary.get("tokens_after"))
        used, cached = _int(usage.get("input_tokens")), _int(usage.get("cached_input_tokens"))
        self.requests += 1
        self.before, self.after = self.before + before, self.after + after
        self.input, self.cached = self.input + used, self.cached + cached
        self.cost, self.saved = (
            _add(self.cost, cost.get("usd")),
            _add(self.saved, cost.get("saved_usd")),
        )
        if summary.get("outcome") == "refused":
            self.refusals[str(summary.get("reason"))] += 1
        self.series.append(
            {
                "time": summary.get("time"),
                "input_tokens": used,
                "cached_input_tokens": cached,
                "tokens_before": before,
                "tokens_after": after,
            }
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "policy": self.policy,
            "requests": self.requests,
            "tokens_before": self.before,
            "tokens_after": self.after,
            "tokens_saved": self.before - self.after,
            "cost_usd": self.cost,
            "saved_usd": self.saved,
            "input_tokens": self.input,
            "cached_input_tokens": self.cached,
            "cached_share": self.cached / self.input if self.input else 0.0,
            "refusals": dict(self.refusals),
            "series": sorted(self.series, key=lambda point: point["time"] or 0.0),
        }


def aggregate(summaries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """`{"object": "context.stats", "groups": [...]}`, one group per (tenant, policy)."""
    groups: dict[tuple[str, str], _Group] = {}
    for summary in summaries:
        key = (str(summary.get("tenant")), str(summary.get("policy")))
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(*key)
        group.add(summary)
    return {"object": "context.stats", "groups": [groups[k].as_dict() for k in sorted(groups)]}
