"""The facts as the whole request states them now, and the proxy's fact lines brought up to date.

A summary is frozen when it is made (prefix stable), and a cleared tool result's placeholder is a
function of the result; a later turn may correct a fact either states. Before such a text goes
into a prompt, each of its fact lines (`- subject: value ...`) whose value the request has
superseded since is written at present: the current value with the one it replaced beside it
on the same line (`Fact.line`); any other line naming a superseded value (a detail sentence, a
command, a decision) ends with the current value (`(corrected since: subject: value)`), and an id
list names the current value beside the superseded id (`TRK-1 (now TRK-2)`: the id was touched,
and is no longer the value). So no line the proxy writes shows a superseded value without its
correction, and the text changes only when a correction arrives.

The ledger reads every message and every tool result of the request (tool results longer than
`MAX_SCANNED_CHARS` are output, not statements, and are skipped), plus the fields of JSON records
that a later record with the same id changed (`tracking_number of ORD-1`: the order fetched
again). Pure: the same request gives the same ledger.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import orjson

from proxy.engine.step_api import PrepareContext
from proxy.engine.steps.summarize.extract import SpanText
from proxy.engine.steps.summarize.facts import MAX_VALUE_CHARS, Change, Fact, ledger
from proxy.engine.tool_text import is_proxy_text

MAX_SCANNED_CHARS = 32_000
"""A tool result longer than this is read for facts by the summary of its span only."""
MAX_STATED = 2
"""A cleared result's placeholder names at most this many facts it stated."""
Facts = Mapping[str, Fact]
"""The request's facts by lowercased subject."""
_ID_LIST = "Files and ids touched: "
_ID_KEY = re.compile(r"(?:\w+_)?id")
"""A JSON record's id field (`id`, `order_id`): tool output, not a wire field."""


def request_facts(
    ctx: PrepareContext, known: Sequence[tuple[str, str]] = (), upto: int | None = None
) -> dict[str, Fact]:
    """Every fact the request's messages and tool results state, at its latest value (`known`:
    (subject, value) a frozen text states, which may come from a result too long to read;
    `upto`: only units up to this one are read)."""
    texts: list[SpanText] = []
    records: list[tuple[str, int]] = []
    for u, unit in enumerate(ctx.units[: None if upto is None else upto + 1]):
        results = set(unit.result_indices)
        for index in unit.indices:
            item = ctx.messages[index]
            turn = ctx.unit_turn[u] + 1
            if index in results:
                text = ctx.wire.result_text(item) or ""
                if text and len(text) <= MAX_SCANNED_CHARS:
                    texts.append(SpanText(text, "result", turn))
                    records.append((text, turn))
                continue
            text = ctx.wire.item_text(item) or ""
            if text and not is_proxy_text(text, ctx.own_text_mac):
                texts.append(SpanText(text, "", turn))
    facts = {f.subject.lower(): f for f in ledger(texts, known)}
    for fact in record_fields(records):
        facts.setdefault(fact.subject.lower(), fact)
    return facts


def record_fields(results: Sequence[tuple[str, int]]) -> list[Fact]:
    """The fields of JSON records that a later record with the same id changed: a result that
    is one JSON object with an id (`id`, `*_id`) gives `field of ID` for each of its text
    fields that holds a number or an id; only those whose value changed are kept."""
    facts: dict[str, Fact] = {}
    for position, (text, turn) in enumerate(results, start=1):
        for subject, value in _record(text):
            fact = facts.get(subject)
            if fact is None:
                facts[subject] = Fact(subject, value, position, said=False)
            elif fact.value != value:
                fact.changes.insert(0, Change(fact.value, turn, False))
                fact.value = value
    return [f for f in facts.values() if f.changes]


def _record(text: str) -> list[tuple[str, str]]:
    if not text.lstrip().startswith("{"):
        return []
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(record, dict):
        return []
    ids = [v for k, v in record.items() if _ID_KEY.fullmatch(k) and isinstance(v, str)]
    if len(ids) != 1 or not 0 < len(ids[0]) <= MAX_VALUE_CHARS:
        return []
    return [
        (f"{key} of {ids[0]}", value) for key, value in record.items()
        if isinstance(value, str) and value != ids[0] and 0 < len(value) <= MAX_VALUE_CHARS
        and any(ch.isdigit() for ch in value)
    ]


def stated(text: str, facts: Facts, turn: int = 0) -> list[str]:
    """The facts a tool result states (at most `MAX_STATED`), each at present:
    `subject: value`, or the current value with this one beside it when it was superseded."""
    if len(text) > MAX_SCANNED_CHARS:
        return []
    out: list[str] = []
    for fact in ledger([SpanText(text, "result", turn)])[:MAX_STATED]:
        now = facts.get(fact.subject.lower())
        if now is not None and now.value != fact.value and fact.value in now.superseded():
            out.append(now.line())
        else:
            out.append(fact.line(history=False))
    return [line for line in out if len(line) <= 2 * MAX_VALUE_CHARS]


def at_present(text: str, facts: Facts) -> str:
    """`text` (a summary's body, the changes after it, a placeholder's facts) with each fact
    line the request has corrected since written at present, and the other lines naming a
    superseded value left out (an id list keeps its other ids)."""
    stale = _stale(facts)
    if not any(f.changes for f in facts.values()):
        return text
    out: list[str] = []
    for line in text.splitlines():
        fact = _corrected(line, facts)
        if fact is not None:
            lead = line[: len(line) - len(line.lstrip("> -"))]
            out.append(lead + fact.line())
        elif line.startswith(_ID_LIST):
            out.append(_ID_LIST + ", ".join(
                f"{x} (now {stale[x].value})" if x in stale else x
                for x in line.removeprefix(_ID_LIST).split(", ")))
        else:
            out.append(_annotated(line, stale))
    return "\n".join(out)


def _annotated(line: str, stale: Mapping[str, Fact]) -> str:
    """`line`, followed by the current value of each fact it names a superseded value of."""
    named = {
        f.subject: f for v, f in stale.items() if _shows(line, v) and not _shows(line, f.value)
    }
    notes = "; ".join(f"{f.subject}: {f.value}" for f in named.values())
    return f"{line} (corrected since: {notes})" if notes else line


def _corrected(line: str, facts: Facts) -> Fact | None:
    """The fact a `- subject: value ...` line states when the request superseded that value."""
    body = line.lstrip("> ")
    if not body.startswith("- "):
        return None
    subject, sep, rest = body[2:].partition(": ")
    if not sep:
        return None
    fact = facts.get(subject.lower())
    value = rest.split(" (was ", 1)[0]
    if fact is None or fact.value == value or value not in fact.superseded():
        return None
    return fact


def _stale(facts: Facts) -> dict[str, Fact]:
    """Each superseded value (that is no fact's current value) with its fact."""
    now = {f.value for f in facts.values()}
    return {v: f for f in facts.values() for v in f.superseded() if v not in now}


def _shows(line: str, value: str) -> bool:
    """Whether `line` names `value` whole (not inside a longer token)."""
    return re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", line) is not None


def stale_lines(text: str, facts: Facts) -> Sequence[str]:
    """The lines of `text` naming a value the request superseded without naming its current
    value (none in a text `at_present` wrote)."""
    stale = _stale(facts)
    return [
        line for line in text.splitlines()
        if any(_shows(line, v) and not _shows(line, f.value) for v, f in stale.items())
    ]
