"""Smoke test of the ratio replay (bench/quality/ratio_replay.py): with the count ratio moving
between requests, no earlier cut moves while the previous prompt plus the new messages fits."""

from __future__ import annotations

from shared_tokens import shared_catalog, shared_counters

from bench.quality.gen import growing
from bench.quality.methods import derived_name, derived_policies
from bench.quality.ratio_replay import replay


async def test_a_moving_ratio_moves_no_cut_that_is_not_due() -> None:
    scenario = growing(1, 40)
    with derived_policies([4_000], shared_catalog()) as (policies, _):
        name = derived_name("default", 4_000)
        steady = await replay(scenario, policies, name, shared_counters(), False)
        moving = await replay(scenario, policies, name, shared_counters(), True)
    assert steady.breaks > 0 and moving.breaks > 0  # the conversation is cut
    assert steady.undue == moving.undue == 0
    assert moving.share > 0.8 and steady.refused == moving.refused == 0
