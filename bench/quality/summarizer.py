"""A scripted summarizer for `bench.quality`: what a summarizer that never misses a stated fact
would keep, as a stand-in for a model (no model runs here).

It reads the bench's own fact grammar (`bench.quality.text.Fact`: statements, corrections, and
the findings of scenario B's reports) out of each transcript, keeps the current value of every
fact (a correction replaces it, a previous summary is folded in), lists the ids the tools were
called with, and answers in the summarizer's strict JSON shape, so the whole compaction path
(batches, rolling up, validation, the frozen store, the fallback) runs as with a model. Its
numbers are an upper bound for a model summary, not a measurement of one.
"""

from __future__ import annotations

import json
import re

from proxy.engine.steps.summarize.summarizer import SummaryCall, SummaryReply

_END = r"\.(?:\s|$|\")"
_STATED = re.compile(
    r"For the record, the (?P<attr>[^.]+?) of (?P<subj>[^.]+?) is (?P<val>.+?)" + _END
)
_FOUND = re.compile(
    r"At (?P<subj>[^,]+), the (?P<attr>[^.]+?) over the study period was (?P<val>.+?)" + _END
)
_FIXED = re.compile(
    r"Correction on (?P<subj>[^:]+): its (?P<attr>[^.]+?) changed\. Please use (?P<val>.+?) "
    r"from now on"
)
_FACT_LINE = re.compile(r"^- (?P<name>.+?): (?P<val>.+)$")
_IDS = re.compile(r"\b(?:REC|DOC|RPT|CTR)-[A-Z0-9]+\b")


class ScriptedSummarizer:
    """`engine.summarizer.Summarizer` without a model (see the module docstring)."""

    def __init__(self) -> None:
        self.calls = 0

    async def summarize(self, call: SummaryCall) -> SummaryReply:
        self.calls += 1
        facts: dict[str, str] = {}
        in_facts = False
        for line in call.previous.splitlines():
            in_facts = line.startswith("Facts") or (in_facts and line.startswith("- "))
            found = _FACT_LINE.match(line) if in_facts else None
            if found:
                facts[found["name"]] = found["val"]
        for pattern in (_STATED, _FOUND, _FIXED):
            for match in pattern.finditer(call.transcript):
                facts.pop(f"{match['attr']} of {match['subj']}", None)
        for match in sorted(
            (m for p in (_STATED, _FOUND, _FIXED) for m in p.finditer(call.transcript)),
            key=lambda m: m.start(),
        ):
            facts[f"{match['attr']} of {match['subj']}"] = match["val"]
        resources = sorted(set(_IDS.findall(call.transcript)))
        shape = {
            "facts": [{"name": k, "value": v} for k, v in reversed(list(facts.items()))],
            "decisions": [],
            "open_questions": [],
            "resources": resources[:20],
            "errors": [],
        }
        answer = json.dumps(shape)
        usage = {"prompt_tokens": len(call.transcript) // 4,
                 "completion_tokens": len(answer) // 4}
        return SummaryReply(answer, "scripted", usage)
