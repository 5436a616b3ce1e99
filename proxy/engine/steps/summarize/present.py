"""The extract's summary: what is true now, then what was done, in sections, within a budget.

In this order: `Facts (current values)` (one line per subject, the value it replaced beside it
with the turn of the correction: a superseded value never stands on a line of its own),
`Decisions`, `Open questions`, `Files and ids touched`, `Commands run (last outcome)`,
`Errors still unresolved`, then `Other details` (the ranked sentences of `extract.digest` in
what is left of the budget, without its fold notes: a count and one example say too little).
The lines are chosen in priority order (facts first, then errors, commands, decisions,
questions, files, details) and written in section order; what does not fit
is counted on a last line (`Only in the archive: ...`), so what was dropped is visible. No line
outside the facts shows a superseded value (it would stand without its correction).

A pure function of its arguments, like the digest: the same span gives the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from proxy.engine.steps.summarize import extract
from proxy.engine.steps.summarize.extract import SpanText
from proxy.engine.steps.summarize.facts import Fact, ledger

FACTS = "Facts (current values):"
DECISIONS = "Decisions:"
QUESTIONS = "Open questions:"
FILES = "Files and ids touched:"
COMMANDS = "Commands run (last outcome):"
ERRORS = "Errors still unresolved:"
DETAILS = "Other details:"
ARCHIVE_ONLY = "Only in the archive"
ORDER = (FACTS, DECISIONS, QUESTIONS, FILES, COMMANDS, ERRORS, DETAILS)
MAX_PER_SECTION = 12
"""Decisions, questions, commands and errors listed at most (the latest; the archive has all)."""
_DECISION = re.compile(
    r"\b(?:decided|we agreed|agreed to|we(?:'ll| will) (?:use|go with|keep|ship)|let's|going with"
    r"|we chose|settled on)\b", re.IGNORECASE)
_OUTCOME = " -> "
MAX_OUTCOME_CHARS = 60
"""A command's last line longer than this is output, not an outcome: the command stands alone."""
_FOLD = re.compile(r"^\d+ lines like: ")
"""A fold note of the digest names one example and a count, not what varied: left out here
(the lines are in the archive)."""
_RESOLVED = re.compile(r"\b(?:\d+ passed|passed|success(?:ful)?|ok|done|fixed|resolved)\b",
                       re.IGNORECASE)


@dataclass
class _Section:
    title: str
    lines: list[str]
    kept: list[str] = field(default_factory=list)


def summary(
    texts: Sequence[SpanText],
    query: str,
    budget: int,
    count: Callable[[str], int],
    resources: Sequence[str] = (),
) -> str:
    """The summary of `texts` (in span order) within `budget` tokens ("" when nothing fits)."""
    facts = ledger(texts)
    stale = {v for f in facts for v in f.superseded()}
    sections = {title: _Section(title, []) for title in ORDER}
    commands, errors = _commands_and_errors(texts)
    sections[DECISIONS].lines = _latest(_sentences(texts, _DECISION.search))
    sections[QUESTIONS].lines = _latest(_sentences(texts, lambda s: s.endswith("?")))
    sections[COMMANDS].lines = commands
    sections[ERRORS].lines = errors
    for title in (DECISIONS, QUESTIONS, COMMANDS, ERRORS):
        sections[title].lines = [x for x in sections[title].lines if not _names(x, stale)]
    room = budget - _trailer_cost(count)  # what is left out is always said
    spent = _fit_facts(sections[FACTS], facts, room, count)
    left_out = len(facts) - len(sections[FACTS].kept)
    for title in (ERRORS, COMMANDS, DECISIONS, QUESTIONS):
        spent, missed = _fit(sections[title], room, spent, count)
        left_out += missed
    files = extract.resources_line(resources, count, max(budget - spent, 0) // 2)
    if files:
        sections[FILES].kept = [files.removeprefix("Touched: ")]
        spent += count(FILES) + count(sections[FILES].kept[0]) + 2
    written = " ".join(_all_kept(sections))
    stated = [f for f in facts if any(k.startswith(f"{f.subject}: ") for k in sections[FACTS].kept)]
    details = extract.digest(texts, query, max(budget - spent, 0), count)
    sections[DETAILS].lines = [
        line for line in (x.removeprefix("- ") for x in details.splitlines())
        if extract.unsourced(line) not in written and not _names(line, stale)
        and not _restates(line, stated) and not _FOLD.match(line)
    ]
    _fit(sections[DETAILS], room, spent, count)
    return _written(sections, left_out, budget, count)


def _fit_facts(section: _Section, facts: list[Fact], budget: int,
               count: Callable[[str], int]) -> int:
    """Every fact that fits, with its history when that fits too (current values first)."""
    spent = count(section.title) + 1
    chosen: list[tuple[int, str]] = []
    for fact in sorted(facts, key=lambda f: (not f.said, f.position)):
        for line in (f"- {fact.line()}", f"- {fact.line(history=False)}"):
            cost = count(line) + 1
            if spent + cost <= budget:
                chosen.append((fact.position, line[2:]))
                spent += cost
                break
    section.kept = [line for _, line in sorted(chosen)]
    return spent if section.kept else 0


def _fit(section: _Section, budget: int, spent: int,
         count: Callable[[str], int]) -> tuple[int, int]:
    """The section's lines that fit after `spent` (its title counted with the first): the new
    spent, and how many did not fit."""
    title = count(section.title) + 1
    for line in section.lines:
        for form in dict.fromkeys((line, line.split(_OUTCOME, 1)[0])):  # a command: then alone
            cost = count(f"- {form}") + 1 + (0 if section.kept else title)
            if spent + cost <= budget:
                section.kept.append(form)
                spent += cost
                break
    return spent, len(section.lines) - len(section.kept)


def _written(sections: dict[str, _Section], left_out: int, budget: int,
             count: Callable[[str], int]) -> str:
    out: list[str] = []
    for title in ORDER:
        kept = sections[title].kept
        if not kept:
            continue
        out.append(title)
        if title == FILES:
            out[-1] = f"{title} {kept[0]}"
            continue
        out += [f"- {line}" for line in (_ordered(sections[title]) if title == DETAILS else kept)]
    if left_out:
        trailer = f"{ARCHIVE_ONLY}: {left_out} more item(s) of these sections."
        if count("\n".join([*out, trailer])) <= budget:
            out.append(trailer)
    return "\n".join(out)


def _ordered(section: _Section) -> list[str]:
    """The detail lines in the digest's (span) order."""
    place = {line: i for i, line in enumerate(section.lines)}
    return sorted(section.kept, key=lambda line: place[line])


def _trailer_cost(count: Callable[[str], int]) -> int:
    return count(f"{ARCHIVE_ONLY}: 1000 more item(s) of these sections.") + 1


def _all_kept(sections: dict[str, _Section]) -> list[str]:
    return [line for s in sections.values() for line in s.kept]


def _names(line: str, stale: set[str]) -> bool:
    """Whether `line` shows one of the `stale` values (whole, not inside a longer token)."""
    return any(_shows(line, value) for value in stale)


def _restates(line: str, facts: list[Fact]) -> bool:
    """A detail line that states a fact the facts section already gives (its subject's last
    word and its current value) and no number the facts do not: the statement, again."""
    shown = set().union(*(extract.values(f.value) for f in facts)) if facts else set()
    return extract.values(line) <= shown and any(
        _shows(line, f.value) and f.subject.split()[-1].lower() in line.lower() for f in facts
    )


def _shows(line: str, value: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", line) is not None


def _sentences(texts: Sequence[SpanText], keep: Callable[[str], object]) -> list[str]:
    return [s for t in texts if not t.source for s in extract.sentences(t.text) if keep(s)]


def _latest(found: list[str]) -> list[str]:
    """The last `MAX_PER_SECTION` distinct lines, in span order."""
    unique = list(dict.fromkeys(reversed(found)))[:MAX_PER_SECTION]
    return unique[::-1]


def _commands_and_errors(texts: Sequence[SpanText]) -> tuple[list[str], list[str]]:
    """`$ command -> its last outcome line` of each command (its latest run), and the error
    details still standing: those of each command's latest run unless it ended well, and
    those outside any command's output."""
    runs: dict[str, tuple[str, list[str]]] = {}
    loose: list[str] = []
    for item in texts:
        command, outcome = "", ""
        errors: list[str] = []
        for line in (" ".join(x.split()) for x in item.text.splitlines()):
            if not line:
                continue
            if extract.COMMAND.match(line):
                if command:
                    runs.pop(command, None)
                    runs[command] = (outcome, errors)
                command, outcome, errors = line, "", []
            elif command:
                outcome = outcome if line.endswith("?") else line  # a question is no outcome
                if extract.DETAIL.match(line):
                    errors.append(line)
            elif extract.DETAIL.match(line):
                loose.append(line)
        if command:
            runs.pop(command, None)
            runs[command] = (outcome, errors)
    commands = [
        f"{cmd}{_OUTCOME}{outcome}" if 0 < len(outcome) <= MAX_OUTCOME_CHARS else cmd
        for cmd, (outcome, _) in runs.items()
    ]
    standing = [
        e for outcome, errors in runs.values()
        if not (_RESOLVED.search(outcome) and not extract.ERROR.search(outcome)) for e in errors
    ]
    return _latest(commands), _latest([_short(e) for e in loose + standing])


def _short(line: str) -> str:
    limit = extract.MAX_SENTENCE_CHARS // 4
    return line if len(line) <= limit else line[: limit - 3] + "..."


def manifest(body: str | None) -> dict[str, object]:
    """What a summary's body keeps, for the manifest: the facts kept (their subjects), the
    facts superseded (`subject: value (was ...)`), and what only the archive has (None: no
    summary was made, the archive has the whole span)."""
    if body is None:
        return {"facts_kept": [], "facts_superseded": [], "archive_only": "the whole span"}
    facts = _facts_lines(body)
    archive = [line for line in body.splitlines() if line.startswith(ARCHIVE_ONLY)]
    return {
        "facts_kept": [f.split(": ", 1)[0] for f in facts],
        "facts_superseded": [f for f in facts if " (was " in f],
        "archive_only": archive[0].split(": ", 1)[1] if archive else "",
    }


def tail(
    texts: Sequence[SpanText], stated: str, budget: int, count: Callable[[str], int]
) -> str:
    """What the turns dropped since the summary's last roll-up change of it (`stated`, its
    body): the facts they state or correct first (`subject: value`, the replaced value beside
    it), then `extract.updates` (the lines that restate or correct a line of it) that show no
    superseded value, within `budget`. "" when none, or when the summary states nothing (it
    was dropped: the archive has it all)."""
    if not stated.strip():
        return ""
    known = stated_facts(stated)
    facts = ledger(texts, known)
    stale = {v for f in facts for v in f.superseded()}
    lines = [f"- {f.line()}" for f in facts]
    rest = extract.updates(texts, stated, budget, count).splitlines()
    lines += [x for x in rest if not _names(x, stale) and not _restates(x, facts)]
    kept: list[str] = []
    spent = 0
    for line in lines:
        cost = count(line) + 1
        if spent + cost <= budget:
            kept.append(line)
            spent += cost
    return "\n".join(kept)


def stated_facts(body: str) -> list[tuple[str, str]]:
    """(subject, value) of each line of a summary body's facts section."""
    return [_subject_value(line) for line in _facts_lines(body)]


def _facts_lines(body: str) -> list[str]:
    """The lines of a summary body's facts section (without their `- `)."""
    lines = [line.removeprefix("> ") for line in body.splitlines()]
    if FACTS not in lines:
        return []
    out: list[str] = []
    for line in lines[lines.index(FACTS) + 1:]:
        if not line.startswith("- "):
            break
        out.append(line[2:])
    return out


def _subject_value(line: str) -> tuple[str, str]:
    subject, _, value = line.partition(": ")
    return subject, value.split(" (was ", 1)[0]
