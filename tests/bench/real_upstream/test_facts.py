"""bench/real_upstream/facts.py: the real-upstream run's facts kept by the extract."""

from __future__ import annotations

import asyncio

from bench.real_upstream.driver import facts_kept, turn_facts
from bench.real_upstream.facts import prepared


def test_the_extract_keeps_the_command_lines_and_assertions_of_pasted_output() -> None:
    sent = asyncio.run(prepared(24, every_cut=True))  # one summary of every dropped turn
    kept, total = facts_kept(sent, 24)
    assert total == 28  # turns 2-22 compacted: 21 command lines and 7 failed assertions
    assert kept >= 12  # 2 before the extract ranked commands and details over FAILED lines
    summary = next(m["content"] for m in sent if "compacted" in str(m.get("content")))
    assert turn_facts(21)[1] in summary  # the last assertion before the cut
    assert summary.count("FAILED") <= 2


def test_with_roll_ups_the_turns_behind_the_tail_item_are_archived_not_digested() -> None:
    sent = asyncio.run(prepared(24))
    texts = [str(m.get("content")) for m in sent]
    summary = next(t for t in texts if "compacted" in t)
    tail = next(t for t in texts if "later turn(s)" in t)
    assert texts.index(tail) == texts.index(summary) + 1
    kept, total = facts_kept(sent, 24)
    assert total == 28 and kept >= 8  # the summary's span only (measured: 11)
