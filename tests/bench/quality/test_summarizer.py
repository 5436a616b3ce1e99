"""bench/quality/summarizer.py: the scripted stand-in answers in the strict shape and keeps the
current value of every fact of the bench's grammar."""

from __future__ import annotations

import asyncio

from bench.quality.summarizer import ScriptedSummarizer
from proxy.engine.steps.summarize.summarizer import SummaryCall, parse_summary, render


def call(transcript: str, previous: str = "") -> SummaryCall:
    return SummaryCall("i", previous, transcript, 100, None, None)


def test_facts_keep_their_current_value_across_rolled_up_summaries() -> None:
    summarizer = ScriptedSummarizer()
    first = asyncio.run(summarizer.summarize(call(
        "user: For the record, the launch date of KALO is 2034-05-01. Nice.\n"
        "[result of c1] At site MIRA, the median latency over the study period was 40 ms. "
        "REC-ABC123 said so.")))
    shape = parse_summary(first.answer)
    assert {f.name: f.value for f in shape.facts} == {
        "launch date of KALO": "2034-05-01", "median latency of site MIRA": "40 ms"}
    assert shape.resources == ["REC-ABC123"]
    second = asyncio.run(summarizer.summarize(call(
        "user: Correction on KALO: its launch date changed. Please use 2035-01-02 from now on; "
        "the earlier figure 2034-05-01 is out of date.", previous=render(shape))))
    rolled = {f.name: f.value for f in parse_summary(second.answer).facts}
    assert rolled == {"launch date of KALO": "2035-01-02", "median latency of site MIRA": "40 ms"}
    assert summarizer.calls == 2 and second.model == "scripted" and second.usage
