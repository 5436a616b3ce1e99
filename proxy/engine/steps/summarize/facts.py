"""The fact ledger of a span: one entry per subject with its current value and what it replaced.

A sentence that states a value (`the deploy code is ZETA-4821`, `deploy code = ZETA-4821`)
sets the value of its subject (`_subject`: the words before the verb, without a heading, filler
and articles). A later statement of the same subject with another value replaces it; the old
one is kept beside it with the turn it changed at. A correction that names no subject
(`Please use 9090 from now on; the earlier figure 8080 is out of date`) replaces the value of
the fact it names the current value of, with the value it names that no fact ever had.

In tool output (logs, JSON, documents) only a sentence in words states a fact (`the latency
of site X was 40 ms.`): `key = value` lines there are output, by the thousand. A fact a message
stated is kept before one only tool output stated (`Fact.said`).
Pure: the same texts give the same ledger.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from proxy.engine.steps.summarize.extract import CORRECTION, SpanText, sentences

MAX_SUBJECT_WORDS = 10
MAX_VALUE_CHARS = 80
_VERB = re.compile(
    r"\s(?:is|are|was|were|equals|(?:has been |have been |was |were )?(?:set|changed|moved"
    r"|updated) to|=)\s+(?:now\s+)?",
    re.IGNORECASE,
)
_ENDED = re.compile(r"\.[\"',]*$")
"""A sentence's full stop, also inside a JSON string (`... is 40 ms.",`)."""
_TRAILING = ".,;:!?\"'"
_PROSE_VERB = re.compile(r"^\s(?:is|are|was|were)\s", re.IGNORECASE)
"""In tool output only a sentence in words states a fact (`key = value` lines are output)."""
_PROSE_LINE = re.compile(r"^[^\n]* (?:is|are|was|were) [^\n]*$", re.IGNORECASE | re.MULTILINE)
"""A line of tool output with such a verb (the others state nothing)."""
_PROSE_VERBS = (" is ", " are ", " was ", " were ")
_CORRECTION_WORDS = ("correction", "changed", "instead", "from now on", "out of date",
                     "no longer", "update", "actually")
"""Substrings one of which a text matching `extract.CORRECTION` holds (a fast first check)."""
_FILLER = re.compile(
    r"^(?:(?:for the record|note|noted|correction|update|fyi|reminder|also|so|ok|okay|by the way"
    r"|btw|just so you know|to confirm|confirmed)\b[,:]?\s*)+",
    re.IGNORECASE,
)
"""Words before a statement that are not its subject (`For the record, the port is 80`); a
clause that is (`At site X, the uptime was 84%`) stays."""
_PLACE = re.compile(r"^(?:at|in|on|for|of|from|under|within|during|across|per)\s", re.IGNORECASE)
_LEAD = re.compile(r"^(?:(?:the|a|an|its|our|my|their|your)\s+)+", re.IGNORECASE)
_PRONOUN = re.compile(r"^(?:this|that|it|there|which|what|who|how|why|here|he|she|they)\b",
                      re.IGNORECASE)
_MARK = re.compile(r"\d|\b[A-Z][A-Za-z]+\b|[\w.-]+/[\w.-]+|\b\w+[_-]\w+\b")
_CODE = re.compile(r"[()\[\]{}<>\"]|\b(?:await|return|def|lambda|self)\b")
"""A value with these is code (an assignment pasted with a file), not a stated fact."""
MIN_NAMED_CHARS = 3
"""A correction is matched to a fact by the fact's whole current value, of this length at least."""
_NEW = re.compile(
    r"\b(?:use|is now|are now|(?:changed|set|updated|moved) to)\s+(.+?)"
    r"(?=\s+(?:from now on|instead|going forward)\b|;|\.(?:\s|$)|,\s(?!\d)|$)",
    re.IGNORECASE,
)
_CUT = re.compile(r";\s|\s\(|,\s(?=[A-Za-z])|\s-\s")
"""Where a value ends: the next clause (`, port: 9090`, `; ...`, ` (...)`), not `March 3, 2026`."""


@dataclass(frozen=True)
class Change:
    value: str
    """The value that was replaced."""
    turn: int
    corrected: bool
    """A correction replaced it (otherwise a plain restatement with another value)."""


@dataclass
class Fact:
    subject: str
    value: str
    position: int
    """The first sentence that stated it: facts are listed in the order they were first stated."""
    changes: list[Change] = field(default_factory=list)
    """The values it had before, the latest first."""
    said: bool = True
    """A message stated it (not only tool output): such facts are kept first."""

    def line(self, history: bool = True) -> str:
        """`subject: value`, and with `history` the value it replaced on the same line."""
        if not history or not self.changes:
            return f"{self.subject}: {self.value}"
        last = self.changes[0]
        how = "corrected" if last.corrected else "changed"
        at = f" at turn {last.turn}" if last.turn > 0 else ""
        earlier = "".join(f"; before that {c.value}" for c in self.changes[1:3])
        return f"{self.subject}: {self.value} (was {last.value}, {how}{at}{earlier})"

    def superseded(self) -> list[str]:
        return [c.value for c in self.changes if c.value != self.value]


def ledger(texts: Sequence[SpanText], known: Sequence[tuple[str, str]] = ()) -> list[Fact]:
    """The facts the span states, in the order first stated, each at its latest value
    (`known`: (subject, value) stated before the span, which its corrections may name; listed
    only when the span changes them)."""
    facts = {s.lower(): Fact(s, v, -len(known) + k) for k, (s, v) in enumerate(known)}
    position = 0
    for item in texts:
        changed = False
        lowered = item.text.lower()
        for sentence in sentences(_prose_lines(item.text, lowered) if item.source else item.text):
            position += 1
            stated = statement(sentence, prose=bool(item.source))
            if stated is not None:
                said = not item.source
                changed |= _state(facts, stated, position, item.turn, sentence, said)
        for part in _corrections(item.text, lowered, changed):
            _correct(facts, part, item.turn)
    found = [f for f in facts.values() if f.position > 0 or f.changes]
    return sorted(found, key=lambda f: f.position)


def _prose_lines(text: str, lowered: str) -> str:
    """The lines of tool output that may state a fact (`... is X.`), found by plain substring
    scans first, so that long machine output costs no sentence splitting."""
    if not any(verb in lowered for verb in _PROSE_VERBS):
        return ""
    return "\n".join(m.group(0) for m in _PROSE_LINE.finditer(text))


def _corrections(text: str, lowered: str, changed: bool) -> list[str]:
    """Where a correction naming no subject may be: the whole text when no sentence of it
    stated a value, else each of its lines that reads as a correction (a long tool result
    states many values, and corrects one of them in a paragraph of its own)."""
    if not any(word in lowered for word in _CORRECTION_WORDS) or not CORRECTION.search(text):
        return []
    if not changed:
        return [text]
    return [line for line in text.splitlines() if CORRECTION.search(line)]


def statement(sentence: str, prose: bool = False) -> tuple[str, str] | None:
    """(subject, value) of a sentence that states a value, or None (`prose`: only a sentence
    in words, ending with a full stop, `... is X.`)."""
    found = _VERB.search(sentence)
    if found is None:
        return None
    if prose and not (_PROSE_VERB.match(found.group(0)) and _ENDED.search(sentence)):
        return None
    subject = _subject(sentence[: found.start()])
    value = _CUT.split(sentence[found.end():], maxsplit=1)[0].strip().rstrip(_TRAILING).strip()
    words = subject.split()
    if (
        not words or len(words) > MAX_SUBJECT_WORDS or _PRONOUN.match(subject)
        or any(ch.isdigit() for ch in subject) or "?" in sentence
    ):
        return None
    if not value or len(value) > MAX_VALUE_CHARS or not _MARK.search(value) or _CODE.search(
        value
    ):
        return None
    return subject, value


def _subject(before: str) -> str:
    """The subject in the words before the verb: after a heading (`Note: ...`), without filler
    (`For the record, ...`), the last clause, with the one before it when that one places it
    (`At site X, the uptime`), articles dropped."""
    text = _FILLER.sub("", before.split(": ")[-1].strip(" \"'`*"))
    clauses = text.split(", ")
    subject = clauses[-1]
    if len(clauses) > 1 and _PLACE.match(clauses[-2]):
        subject = f"{clauses[-2]}, {subject}"
    return _LEAD.sub("", subject).strip(" \"'`*")


def _state(
    facts: dict[str, Fact], stated: tuple[str, str], position: int, turn: int, sentence: str,
    said: bool,
) -> bool:
    subject, value = stated
    key = subject.lower()
    fact = facts.get(key)
    if fact is None:
        facts[key] = Fact(subject, value, position, said=said)
        return True
    fact.said |= said
    if fact.value == value:
        return False
    corrected = bool(CORRECTION.search(sentence))
    fact.changes.insert(0, Change(fact.value, turn, corrected))
    fact.value = value
    return True


def _correct(facts: dict[str, Fact], text: str, turn: int) -> None:
    """A correction naming exactly one fact's current value, and a new value after `use`,
    `is now`, `changed to`...: the fact takes the new value."""
    targets = [f for f in facts.values() if len(f.value) >= MIN_NAMED_CHARS and f.value in text]
    if len(targets) != 1:
        return
    fact = targets[0]
    for found in _NEW.finditer(text):
        new = found.group(1).strip().rstrip(".,;:!?").strip()
        if (
            new and new != fact.value and fact.value not in new and _MARK.search(new)
            and len(new) <= MAX_VALUE_CHARS and not _CODE.search(new)
        ):
            fact.changes.insert(0, Change(fact.value, turn, True))
            fact.value = new
            return


