"""Scenario generators A (long chatter), B (research agent) and E (growing conversation).

C and D (tool chains, coding agent) live in `bench.quality.gen_tools`. `generate()` builds all.
"""

from __future__ import annotations

import json
from typing import Any

from bench.quality.gen_tools import coding_agent, tool_chains
from bench.quality.text import (
    TITLES,
    Fact,
    Gen,
    Request,
    Scenario,
    assistant,
    body,
    fetch,
    new_fact,
    numbered,
    same_kind,
    system,
    tool_schema,
    user,
)


def generate(seed: int, *, growing_turns: int = 200) -> list[Scenario]:
    """All five scenarios for one seed (deterministic)."""
    return [
        chatter(seed),
        research(seed),
        tool_chains(seed),
        coding_agent(seed),
        growing(seed, growing_turns),
    ]


# -- A ------------------------------------------------------------------------------------------


def chatter(seed: int, turns: int = 140) -> Scenario:
    gen = Gen(seed, "A")
    facts = [new_fact(gen) for _ in range(8)]
    stated = dict(zip(sorted(gen.rng.sample(range(1, 30), len(facts))), facts, strict=True))
    corrected = gen.rng.sample(facts, 3)
    fixes = dict(
        zip(
            sorted(gen.rng.sample(range(40, turns - 5), 4)), [*corrected, corrected[0]], strict=True
        )
    )
    messages = [
        system(
            "You are a project coordinator's assistant. Keep track of every project detail "
            "the user gives you; later details override earlier ones."
        ),
        user(
            "I'll brief you on our portfolio over a long chat. Remember the specifics: budgets, "
            "dates, owners and ids. " + gen.paragraph(3)
        ),
        assistant("Understood. I'll keep track of each project's details as we go."),
    ]
    for t in range(1, turns + 1):
        parts = [gen.paragraph(gen.rng.randint(2, 6))]
        if t in stated:
            parts.insert(gen.rng.randint(0, 1), stated[t].statement())
        if t in fixes:
            fact = fixes[t]
            parts.insert(1, fact.correct(same_kind(gen, fact)))
        messages.append(user(" ".join(parts)))
        messages.append(assistant(gen.paragraph(gen.rng.randint(3, 9))))
    probes = [f.probe() for f in facts]
    messages.append(user("Before we wrap up, answer from our conversation:\n" + numbered(probes)))
    return Scenario("A", TITLES["A"], seed, [Request(body(messages, None), probes)])


# -- B ------------------------------------------------------------------------------------------

_METRICS = (
    ("measured uptime", "percent"),
    ("median latency", "ms"),
    ("annual operating cost", "amount"),
    ("incident count", "count"),
)


def _metric_value(gen: Gen, kind: str) -> str:
    if kind == "percent":
        return gen.percent()
    if kind == "ms":
        return gen.number(20, 900, " ms")
    if kind == "amount":
        return gen.amount()
    return gen.number(3, 400, " incidents")


def _finding(gen: Gen) -> Fact:
    attribute, kind = gen.rng.choice(_METRICS)
    return Fact(f"site {gen.codename()}", attribute, _metric_value(gen, kind))


def _finding_text(fact: Fact) -> str:
    return f"At {fact.subject}, the {fact.attribute} over the study period was {fact.value}."


def report(gen: Gen, report_id: str, title: str, findings: list[Fact], chars: int) -> str:
    """A long report; findings sit mostly in the middle (outside any preview head/tail)."""
    rows = "\n".join(
        f"| site {gen.codename()} | {attr} | {_metric_value(gen, kind)} |"
        for attr, kind in (gen.rng.choice(_METRICS) for _ in range(gen.rng.randint(12, 30)))
    )
    body_parts = [gen.prose(chars // 6) for _ in range(4)]
    for fact in findings:
        k = gen.rng.randrange(len(body_parts))
        body_parts[k] += " " + _finding_text(fact) + " " + gen.paragraph(2)
    return "\n\n".join(
        [
            f"# {title}\nReport {report_id}. Prepared by {gen.person()}.",
            "## Abstract\n" + gen.paragraph(5),
            "## 1. Background\n" + body_parts[0],
            "## 2. Method\n" + body_parts[1],
            "## 3. Measurements\n| site | metric | value |\n|---|---|---|\n" + rows,
            "## 4. Discussion\n" + body_parts[2] + "\n\n" + body_parts[3],
            "## 5. Conclusion\n" + gen.prose(chars // 8),
        ]
    )


def _catalog(gen: Gen, ids: list[str], titles: list[str]) -> str:
    entries = [
        {
            "report_id": i,
            "title": t,
            "published": gen.date(),
            "pages": gen.rng.randint(12, 90),
            "authors": [gen.person() for _ in range(2)],
            "abstract": gen.paragraph(2),
        }
        for i, t in zip(ids, titles, strict=True)
    ]
    return json.dumps({"query_id": gen.hexid(), "results": entries}, indent=2)


def research(seed: int) -> Scenario:
    gen = Gen(seed, "B")
    tools = [
        tool_schema("search_reports", "Search the report library.", query="string"),
        tool_schema("fetch_report", "Fetch the full text of one report.", report_id="string"),
    ]
    ids = [gen.ident("RPT", 5) for _ in range(7)]
    titles = [f"Operations study {gen.codename()}" for _ in ids]
    findings = [[_finding(gen) for _ in range(gen.rng.randint(1, 2))] for _ in ids]
    texts = [
        report(gen, i, t, f, gen.rng.randint(30_000, 60_000))
        for i, t, f in zip(ids, titles, findings, strict=True)
    ]
    messages: list[dict[str, Any]] = [
        system("You are a research agent. Read sources with the tools and cite exact figures."),
        user(
            f"Research question: how do the sites in our operations studies compare? "
            f"{gen.paragraph(2)} Start by searching the library."
        ),
    ]
    messages += fetch(
        gen, "search_reports", [{"query": "operations study"}], [_catalog(gen, ids, titles)]
    )
    messages.append(assistant(f"I found {len(ids)} reports. Reading them one by one."))
    _read_reports(gen, messages, ids[:3], texts[:3], parallel_from=1)
    messages.append(user("Keep going with the rest. " + gen.paragraph(1)))
    _read_reports(gen, messages, ids[3:5], texts[3:5], parallel_from=2)
    fixed = findings[0][0]
    erratum_id = gen.ident("RPT", 5)
    messages.append(user("Check whether any erratum was published for these studies."))
    messages += fetch(
        gen,
        "search_reports",
        [{"query": "erratum"}],
        [_catalog(gen, [erratum_id], [f"Erratum to report {ids[0]}"])],
    )
    erratum = (
        f"# Erratum to report {ids[0]}\n\n{gen.paragraph(3)}\n\n"
        f"{fixed.correct(_metric_value(gen, _kind(fixed)))}\n\n{gen.prose(4000)}"
    )
    messages += fetch(gen, "fetch_report", [{"report_id": erratum_id}], [erratum])
    messages.append(
        assistant(
            "The erratum corrects one figure of the first report; I will use "
            "the corrected value. " + gen.paragraph(2)
        )
    )
    messages.append(user("Now read the last two reports."))
    _read_reports(gen, messages, ids[5:], texts[5:], parallel_from=0)
    probes = [f.probe() for group in findings for f in group]
    messages.append(user("Answer with exact figures from the reports:\n" + numbered(probes)))
    return Scenario("B", TITLES["B"], seed, [Request(body(messages, tools), probes)])


def _kind(fact: Fact) -> str:
    return next(kind for attr, kind in _METRICS if attr == fact.attribute)


def _read_reports(
    gen: Gen,
    messages: list[dict[str, Any]],
    ids: list[str],
    texts: list[str],
    *,
    parallel_from: int,
) -> None:
    """Fetch reports one per call up to `parallel_from`, then the rest as parallel calls."""
    for i, text in zip(ids[:parallel_from], texts[:parallel_from], strict=True):
        messages += fetch(gen, "fetch_report", [{"report_id": i}], [text])
        messages.append(assistant(f"Notes on {i}: {gen.paragraph(3)}"))
    rest = list(zip(ids[parallel_from:], texts[parallel_from:], strict=True))
    if rest:
        messages += fetch(
            gen, "fetch_report", [{"report_id": i} for i, _ in rest], [t for _, t in rest]
        )
        messages.append(assistant(f"Notes on {', '.join(i for i, _ in rest)}: {gen.paragraph(4)}"))


# -- E ------------------------------------------------------------------------------------------


def growing(seed: int, turns: int = 200) -> Scenario:
    """One request per turn; each request's probes are the facts stated so far."""
    gen = Gen(seed, "E")
    tools = [
        tool_schema("lookup_record", "Look up one record by id.", record_id="string"),
        tool_schema("fetch_document", "Fetch a document by id.", doc_id="string"),
    ]
    facts: list[Fact] = []
    messages: list[dict[str, Any]] = [
        system(
            "You are an operations assistant in a long-running session. Later details "
            "override earlier ones."
        ),
        user("We'll work through many small questions today. " + gen.paragraph(2)),
    ]
    scenario = Scenario("E", TITLES["E"], seed)
    for t in range(turns):
        last = t == turns - 1
        if t:
            messages.append(user(_growing_user_text(gen, last, facts)))
        if not last:
            messages += _growing_tools(gen, t, facts)
        probes = [f.probe() for f in facts]
        scenario.requests.append(Request(body(list(messages), tools), probes))
        messages.append(assistant(gen.paragraph(gen.rng.randint(1, 4))))
    return scenario


def _growing_user_text(gen: Gen, last: bool, facts: list[Fact]) -> str:
    if last:
        return "Final check, answer from this session:\n" + numbered([f.probe() for f in facts])
    parts = [gen.paragraph(gen.rng.randint(1, 3))]
    roll = gen.rng.random()
    if roll < 0.07:
        fact = new_fact(gen)
        facts.append(fact)
        parts.append(fact.statement())
    elif roll < 0.10 and facts:
        fact = gen.rng.choice(facts)
        parts.append(fact.correct(same_kind(gen, fact)))
    return " ".join(parts)


def _growing_tools(gen: Gen, t: int, facts: list[Fact]) -> list[dict[str, Any]]:
    roll = gen.rng.random()
    if t == 0 or roll > 0.4:
        return []
    if roll < 0.08:
        doc = gen.ident("DOC", 5)
        return fetch(
            gen,
            "fetch_document",
            [{"doc_id": doc}],
            [f"# Document {doc}\n\n" + gen.prose(gen.rng.randint(5_000, 14_000))],
        )
    record_id = gen.ident("REC", 6)
    record: dict[str, Any] = {
        "record_id": record_id,
        "status": gen.rng.choice(["open", "closed", "pending"]),
        "owner": gen.person(),
        "notes": gen.paragraph(gen.rng.randint(1, 3)),
        "history": [
            {"at": gen.date(), "event": gen.words(5)} for _ in range(gen.rng.randint(2, 8))
        ],
    }
    if roll < 0.12:  # a fact first appears inside a tool result
        fact = new_fact(gen)
        facts.append(fact)
        record["notes"] += " " + fact.statement()
    return fetch(gen, "lookup_record", [{"record_id": record_id}], [json.dumps(record, indent=2)])
