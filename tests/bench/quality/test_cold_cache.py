"""Smoke test of the cold-cache bench (bench/quality/cold_cache.py): with detection off no cut
goes deeper; with it on, the due cuts that fall on a cold request do, and the fake's cache
accounting adds up."""

from __future__ import annotations

from shared_tokens import shared_catalog, shared_counters

from bench.quality.cold_cache import Run, session
from bench.quality.gen_agent import agent_session
from bench.quality.methods import derived_name, derived_policies


async def test_detection_off_never_goes_deeper_and_on_does_on_cold_requests() -> None:
    requests = [r.body for r in agent_session(1, 40).requests]
    pauses = set(range(3, 40, 3))
    runs = {}
    with derived_policies([8_000], shared_catalog()) as (policies, _):
        name = derived_name("default", 8_000)
        for label, ttl in (("off", None), ("on", 300)):
            run = runs[label] = Run()
            await session(requests, policies, name, shared_counters(), ttl, pauses, 900.0, run)
    off, on = runs["off"], runs["on"]
    assert off.applied.get("deeper_cut", 0) == 0 and off.applied.get("keep_prefix", 0) > 0
    assert on.applied.get("deeper_cut", 0) > 0
    for run in (off, on):
        assert 0 < run.cached < run.input and run.cost > 0 and run.refused == 0
        assert sum(run.applied.values()) == len(requests)
