"""Scenario a of the availability run (bench/hostile/big_request.py): its bodies are sound
requests of their formats, and a run through a real proxy answers every route."""

from __future__ import annotations

import pytest

from bench.hostile.availability import scripted_upstream
from bench.hostile.big_request import (
    ROUTES,
    Cell,
    fresh_words,
    plain_messages_answer,
    plain_responses_answer,
    request_body,
    run_large_requests,
)
from bench.hostile.loaded import Latencies
from proxy.formats import FORMATS

FORMAT_OF = {
    "prepare": "openai_chat",
    "chat": "openai_chat",
    "messages": "anthropic_messages",
    "responses": "openai_responses",
}


def test_fresh_words_have_the_length_asked_and_differ_between_calls() -> None:
    first, second = fresh_words(10_000), fresh_words(10_000)
    assert len(first) == len(second) == 10_000
    assert first != second


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_each_body_is_one_sound_tool_exchange_holding_the_content(route: str) -> None:
    wire = FORMATS[FORMAT_OF[route]]
    content = fresh_words(5_000)
    body = request_body(route, content)
    items = wire.items(body)
    conversation = wire.parse(items)
    assert not conversation.problems
    exchanges = [u for t in conversation.turns for u in t.units if u.is_tool_exchange]
    assert len(exchanges) == 1
    assert content in [wire.result_text(item) for item in items]


def test_the_plain_answers_report_their_usage() -> None:
    assert FORMATS["anthropic_messages"].prompt_tokens(plain_messages_answer()["usage"]) == 1
    assert FORMATS["openai_responses"].prompt_tokens(plain_responses_answer()["usage"]) == 1


def test_a_cell_row_pools_its_repeats() -> None:
    cell = Cell()
    cell.add(Latencies(2, [0.001, 0.0035]), 2.0, "200")
    cell.add(Latencies(1, [0.002]), 1.0, "200")
    cell.add(Latencies(2, [0.0015]), 4.0, "502 (upstream)")
    assert cell.row("prepare", 30, "base") == (
        "| a. 30 MB prepare | base | 4/5 | 2.0 | 3.5 | 3.5 | 2, 2, 4 | 2.00 s (1.0-4.0) | "
        "2x 200, 1x 502 (upstream) |"
    )


def test_every_route_is_answered_through_a_real_proxy() -> None:
    with scripted_upstream() as (port, _rounds):
        rows = run_large_requests(None, port, [None], [0.02], sorted(ROUTES), repeat=1)
    assert len(rows) == len(ROUTES)
    for row, route in zip(rows, sorted(ROUTES), strict=True):
        assert row.startswith(f"| a. 0.02 MB {route} | installed | ")
        assert row.endswith("| 1x 200 |")
