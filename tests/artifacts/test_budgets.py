"""The pieces of the write budgets that need no store: whose budget a scope draws on, what an
artifact counts, the rate bucket, the answer of `put_many`, and the refusals' log and counts."""

from __future__ import annotations

import logging

import pytest

from proxy.artifacts.budgets import (
    Confirmed,
    RefusalRecorder,
    Refused,
    WriteBudget,
    WriteBudgets,
    WriteLimit,
    budget_owner,
    budget_refusals,
    counted_bytes,
    owner_tag,
    refilled,
    sub_scope,
)
from proxy.engine.steps.summarize.cache import summaries_scope
from proxy.engine.tool_text import own_text_scope
from proxy.engine.working_set import working_set_scope
from proxy.jsonio.slices import LONG_CHARS


@pytest.mark.parametrize(
    ("scope", "owner"),
    [
        ("acme", "acme"),
        ("default:0123456789abcdef", "default:0123456789abcdef"),
        ("acme#session:" + "a" * 32, "acme"),
        (working_set_scope("acme#session:" + "a" * 32), "acme"),
        (summaries_scope("acme"), "acme"),
        (sub_scope(sub_scope("acme", "x"), "y"), "acme"),
    ],
)
def test_sessions_and_sub_scopes_draw_on_their_tenants_budget(scope: str, owner: str) -> None:
    assert budget_owner(scope) == owner


def test_the_proxys_own_text_scope_is_never_a_tenants() -> None:
    assert budget_owner(own_text_scope("acme")) == ""


def test_content_counts_its_utf8_bytes_lone_surrogates_included() -> None:
    assert counted_bytes("abc") == 3
    assert counted_bytes("é€😀") == 2 + 3 + 4
    assert counted_bytes("\ud800") == 3
    long = "é€😀\ud800" * LONG_CHARS  # counted a slice at a time
    assert counted_bytes(long) == len(long.encode("utf-8", "surrogatepass"))


def test_the_bucket_refills_at_the_rate_up_to_one_minutes_worth() -> None:
    assert refilled(0.0, 100.0, 130.0, 600) == 300.0
    assert refilled(100.0, 100.0, 1000.0, 600) == 600.0
    assert refilled(50.0, 100.0, 90.0, 600) == 50.0  # a clock that went back refills nothing


@pytest.mark.parametrize("value", [0, -1])
def test_a_budget_is_positive_or_none(value: int) -> None:
    with pytest.raises(ValueError, match="must be > 0 or None"):
        WriteBudget(bytes_per_minute=value)
    with pytest.raises(ValueError, match="must be > 0 or None"):
        WriteBudget(live_bytes=value)
    assert not WriteBudget().limited and WriteBudget(live_bytes=1).limited


def test_an_owner_has_its_own_budget_or_the_default() -> None:
    budgets = WriteBudgets(WriteBudget(1, 2), {"big": WriteBudget(None, 9)})
    assert budgets.of("big") == WriteBudget(None, 9)
    assert budgets.of("small") == WriteBudget(1, 2)


def test_the_answer_is_a_set_that_names_the_refusals() -> None:
    refused = Refused(WriteLimit.live_bytes, 100, 2, 300)
    confirmed = Confirmed({"a"}, [refused])
    assert confirmed == {"a"} and budget_refusals(confirmed) == (refused,)
    assert budget_refusals({"a"}) == () and budget_refusals(Confirmed({"a"})) == ()


def test_refusals_are_counted_and_logged_once_a_minute_per_owner_and_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="test.budgets")
    now = [1000.0]
    recorder = RefusalRecorder(logging.getLogger("test.budgets"), lambda: now[0])
    live = Refused(WriteLimit.live_bytes, 100, 1, 50)
    rate = Refused(WriteLimit.bytes_per_minute, 60, 2, 70)
    recorder.record("acme", [live, rate])
    recorder.record("acme", [live])
    recorder.record("other", [live])
    now[0] += 60
    recorder.record("acme", [live])
    assert recorder.snapshot() == {
        WriteLimit.live_bytes: (4, 200),
        WriteLimit.bytes_per_minute: (2, 70),
    }
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4
    assert lines[0] == (
        f"write budget reached: scope {owner_tag('acme')}, live_bytes 100: 1 write(s) of 50 "
        "bytes refused (further refusals of this budget for this scope are not logged for 60s)"
    )
    assert lines[1].startswith(f"write budget reached: scope {owner_tag('acme')}, bytes_per_min")
    assert owner_tag("other") in lines[2] and owner_tag("acme") in lines[3]
