"""Extractive compaction: a deterministic digest of a span of dropped turns, without a model.

What a model most often needs later from turns that went: the current value of each fact (a
statement later corrected keeps only its latest form), identifiers, paths, numbers, error lines,
and the files or resources the tools touched. The span's texts are cut into sentences; a
sentence with none of those marks is prose and never kept. The others are scored (errors and
stated facts first, then paths, identifiers and numbers, plus the words they share with the
query: the user's message when the span was cut) and taken best first while they fit the token
budget, then written in the span's order. Ties go to the later sentence.

Pasted terminal output needs two more rules. A command line (`$ pytest ...`) and an error's
detail (pytest's `E   assert ...`, `ValueError: ...` ending a traceback, `error: ...`) say what
was run and what went wrong: they rank above the lines that only report an outcome, and each is
its own fact (two assertion messages are never one value updated). And lines of one form that
differ only in their numbers, paths and words (twenty `tests/x.py::test_y FAILED [40%]`, a
traceback's `File ...` lines, log lines) count as one: the best of them keeps its rank, written
after how many there are (`- 22 lines like: ...`), a second comes after every line not folded,
the others last. A line that states a value (`... is X`), a correction, a command and an
error's detail are never folded.

Everything here is a pure function of its arguments: the same span, query and budget give the
same bytes, which keeps the prompt prefix stable and lets a frozen summary be checked.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MAX_SENTENCE_CHARS = 400
"""A longer sentence is cut to this many characters (with an ellipsis) before it is scored."""
RARE = 3
"""A query word found in more sentences of the span than this counts for less (RARE / n)."""
MAX_RESOURCES = 40
"""Files and resources listed at most (the archive holds the rest)."""
REPEATED = 3
"""Lines of one form are folded when there are at least this many of them."""
_FOLDED = 1000.0
"""What a folded line loses: more than any score, so that it ranks after every other line (the
second example of its form: half of it, after every other line but those folded)."""

_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\[(\"'`])|\n+")
_PATH = re.compile(r"(?<![\w@])(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:py|js|ts|tsx|go|rs|java|c|h|"
                   r"cpp|rb|md|json|yaml|yml|toml|txt|csv|sql|sh|html|css|cfg|ini|lock|log)\b")
_IDENT = re.compile(
    r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_]+(?:-[A-Za-z0-9]+)+\b"
    r"|\b[a-z]+_[a-z0-9_]+\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[0-9a-f]{8,}\b"
)
_RESOURCE_ID = re.compile(r"\b(?=[A-Za-z0-9_-]*\d)[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9]+)+\b")
_NAME = re.compile(r"\b[A-Z]{3,}\b|(?<=[a-z,] )[A-Z][a-z]+\b")
_NUMBER = re.compile(r"\d")
_ERROR = re.compile(r"\b(?:error|exception|traceback|failed|failure|fatal|panic|denied|"
                    r"refused|timeout|timed out|assert\w*|FAIL(?:ED)?|E\d{3,})\b", re.IGNORECASE)
_FACT = re.compile(r"\b(?:is|are|was|were|equals|set to|changed to|use|now)\b|[:=]\s*\S",
                   re.IGNORECASE)
_CORRECTION = re.compile(r"\b(?:correction|changed|instead|from now on|out of date|no longer|"
                         r"update[ds]?|actually)\b", re.IGNORECASE)
_STATES = re.compile(
    r"\s(?:is|are|was|were|equals|set to|changed to)\s|(?<![:=!<>])[:=](?![:=\d])"
)
"""Where a statement's value starts: not inside `::`, `==` or a time or `path:line`."""
_COMMAND = re.compile(r"^\$ \S")
_DETAIL = re.compile(
    r"^(?:E (?:assert\b|[+?-] |\w*(?:Error|Exception)\b|\w+: )"  # pytest's detail lines
    r"|(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b:?"  # a traceback's last line
    r"|(?:error|fatal|panic)(?:\[\w+\])?:|assert\b)"
)
_STATEMENT = re.compile(r"\s(?:is|are|was|were|equals|set to|changed to)\s", re.IGNORECASE)
_KEY = re.compile(r"^[\"'`]?[^\W\d][\w-]*[\"'`]?[:=],?$")
_PATHLIKE = re.compile(r"[/\\_]|::|\w\.\w")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{3,}")
_VALUE = re.compile(r"\S*\d\S*")
_STOP = frozenset(
    {
        "that", "this", "with", "from", "have", "what", "when", "where", "which", "your",
        "about", "there", "their", "them", "they", "will", "would", "could", "should",
        "please", "answer", "into", "over", "also", "just", "only", "than", "then", "were",
        "been",
    }
)


@dataclass(frozen=True)
class SpanText:
    """One text of the span: a message's words, or a tool call's arguments or result."""

    text: str
    source: str = ""
    """Where it came from, as the digest may name it (e.g. a tool call's id); "" for a message."""
    turn: int = 0
    """The turn it belongs to, counted from 1 (0: unknown)."""


@dataclass(frozen=True)
class _Candidate:
    position: int
    sentence: str
    score: float
    key: str
    """Sentences with the same key state the same thing; only the latest is kept."""
    superseded_by: frozenset[str] = frozenset()
    """The keys of the later corrections that name one of its values."""
    form: str | None = None
    """Lines of the same form differ only in their numbers, paths and words (`_form`); None:
    never folded with others."""
    asked: bool = False
    """It shares a rare word with the query: folded, it still comes before the others."""


def digest(
    texts: Sequence[SpanText],
    query: str,
    budget: int,
    count: Callable[[str], int],
    resources: Sequence[str] = (),
) -> str:
    """The digest of `texts` (in span order) within `budget` tokens (`count` counts a text):
    a line of `resources` touched (files, urls, ids the tools were called with), then the kept
    sentences as bullets. "" when nothing is worth keeping or nothing fits."""
    header = resources_line(resources, count, budget // 4)
    spent = count(header) if header else 0
    kept: list[_Candidate] = []
    chosen: set[str] = set()
    for candidate in _ranked(texts, _query_words(query)):
        if candidate.superseded_by and not candidate.superseded_by & chosen:
            continue  # never an old value without the correction that replaced it
        line = f"- {candidate.sentence}"
        cost = count(line) + 1
        if spent + cost > budget:
            continue
        kept.append(candidate)
        chosen.add(candidate.key)
        spent += cost
    lines = [f"- {c.sentence}" for c in sorted(kept, key=lambda c: c.position)]
    return "\n".join(([header] if header else []) + lines)


def resources(call: str, exclude: Sequence[str] = ()) -> list[str]:
    """The paths and identifiers a tool call's text names (its own call ids excluded)."""
    found = [m.group(0) for m in _PATH.finditer(call)]
    found += [m.group(0) for m in _RESOURCE_ID.finditer(call)]
    return [r for r in dict.fromkeys(found) if r not in exclude]


def resources_line(resources: Sequence[str], count: Callable[[str], int], budget: int) -> str:
    """`Touched: a, b, ...`: the latest resources (each named once) within `budget` tokens."""
    unique = list(dict.fromkeys(r for r in reversed(resources) if r))[:MAX_RESOURCES]
    while unique:
        more = f" (+{len(set(resources)) - len(unique)} more)" if len(unique) < len(
            set(resources)) else ""
        line = "Touched: " + ", ".join(reversed(unique)) + more
        if count(line) <= budget:
            return line
        unique.pop()
    return ""


def _query_words(query: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORD.findall(query) if w.lower() not in _STOP)


def _ranked(texts: Sequence[SpanText], query: frozenset[str]) -> list[_Candidate]:
    """The candidates worth keeping, latest of each key only, best first (later on ties).

    A query word counts by its rarity in the span: one that many sentences share (`step` in
    "Next step 7, please") says little about which of them is asked for."""
    cut = [(item.source, sentence) for item in texts for sentence in sentences(item.text)]
    words = [{w.lower() for w in _WORD.findall(sentence)} for _, sentence in cut]
    frequency: dict[str, int] = {}
    for found in words:
        for word in found & query:
            frequency[word] = frequency.get(word, 0) + 1
    weight = {word: min(1.0, RARE / n) for word, n in frequency.items()}
    latest: dict[str, _Candidate] = {}
    for position, ((source, sentence), found) in enumerate(zip(cut, words, strict=True)):
        overlap = sum(weight[w] for w in found & query)
        candidate = _candidate(position, sentence, source, overlap)
        if candidate is not None:
            latest[candidate.key] = candidate
    ranked = _superseded(_folded(list(latest.values())))
    return sorted(ranked, key=lambda c: (-c.score, -c.position))


def _folded(candidates: list[_Candidate]) -> list[_Candidate]:
    """Of `REPEATED` or more lines of one form, the best keeps its score and notes how many
    there are; the second best (and any that shares a rare word with the query) ranks after
    every line not folded, the others after that."""
    forms: dict[str, list[_Candidate]] = {}
    for c in candidates:
        if c.form is not None:
            forms.setdefault(c.form, []).append(c)
    changed: dict[int, _Candidate] = {}
    for group in forms.values():
        if len(group) < REPEATED:
            continue
        group.sort(key=lambda c: (-c.score, -c.position))
        best = group[0]
        note = f"{len(group)} lines like: {best.sentence}"  # the quote itself stays verbatim
        changed[best.position] = dataclasses.replace(best, sentence=note)
        for rank, c in enumerate(group[1:]):
            loss = _FOLDED / 2 if rank == 0 or c.asked else _FOLDED
            changed[c.position] = dataclasses.replace(c, score=c.score - loss)
    return [changed.get(c.position, c) for c in candidates]


def _superseded(candidates: list[_Candidate]) -> list[_Candidate]:
    """A sentence whose value a later correction names ("use 9090 ...; 8080 is out of date")
    is superseded: it ranks below every such correction (so each is decided first) and
    `digest` keeps it only next to one of them (a correction names the old value too), so a
    digest never shows a superseded value without what replaced it."""
    by_value: dict[str, list[_Candidate]] = {}
    for d in candidates:
        if _CORRECTION.search(d.sentence):
            for value in _values(d.sentence):
                by_value.setdefault(value, []).append(d)
    final: dict[str, float] = {}
    out: list[_Candidate] = []
    for c in sorted(candidates, key=lambda c: -c.position):  # the latest first
        later = frozenset(
            d.key for value in _values(c.sentence)
            for d in by_value.get(value, ()) if d.position > c.position
        )
        score = min([c.score, *(final[key] - 0.5 for key in later)])
        final[c.key] = score
        out.append(dataclasses.replace(c, score=score, superseded_by=later))
    return out


def _values(sentence: str) -> set[str]:
    """The tokens with a digit in them, without the punctuation around them."""
    return {v.strip(".,;:!?()[]{}\"'`") for v in _VALUE.findall(sentence)}



def sentences(text: str) -> list[str]:
    """`text` cut into sentences (and lines), whitespace collapsed, long ones shortened."""
    out = []
    for part in _SPLIT.split(text):
        sentence = " ".join(part.split())
        if len(sentence) > MAX_SENTENCE_CHARS:
            sentence = sentence[: MAX_SENTENCE_CHARS - 3] + "..."
        if sentence:
            out.append(sentence)
    return out


def _candidate(
    position: int, sentence: str, source: str, overlap: float
) -> _Candidate | None:
    error = bool(_ERROR.search(sentence))
    paths = len(_PATH.findall(sentence))
    idents = len(_IDENT.findall(sentence))
    numbers = bool(_NUMBER.search(sentence))
    names = bool(_NAME.search(sentence))
    command = bool(_COMMAND.match(sentence))
    detail = bool(_DETAIL.match(sentence))
    if not (error or paths or idents or numbers or names or command or detail):
        return None
    fact = bool(_FACT.search(sentence)) and (numbers or names or idents > 0 or paths > 0)
    score = (
        4.0 * error
        + 3.0 * fact
        + 2.0 * bool(_CORRECTION.search(sentence))
        + 1.5 * min(paths, 2)
        + 1.0 * min(idents, 3)
        + 0.5 * numbers
        + 0.5 * names
        + 2.0 * min(overlap, 4.0)
        + 6.0 * command
        + 4.0 * detail
    )
    text = f"[{source}] {sentence}" if source else sentence
    form = None if command or detail else _form(sentence)
    key = sentence.lower() if command or detail else _key(sentence)
    return _Candidate(position, text, score, key, form=form, asked=overlap >= 1)


def _form(sentence: str) -> str | None:
    """The sentence with every token holding a digit as `#`, every path or identifier as `~`
    and every other word as `w` (upper-case words such as `FAILED` or `ERROR` and keys such as
    `"eta":` stay as they are): the form that repeated output lines share. None for a line that
    is not output-like (no number, path or identifier) or that states a value or corrects one."""
    if _STATEMENT.search(sentence) or _CORRECTION.search(sentence):
        return None
    tokens: list[str] = []
    for token in sentence.split():
        core = token.strip(".,;:!?()[]{}\"'`")
        if _KEY.match(token):
            tokens.append(token)
        elif _NUMBER.search(token):
            tokens.append("#")
        elif _PATHLIKE.search(token):
            tokens.append("~")
        elif core.isalpha() and not core.isupper():
            tokens.append(token.replace(core, "w", 1))
        else:
            tokens.append(token)
    if len(tokens) < 2 or not {"#", "~"} & set(tokens):
        return None
    return " ".join(tokens)


def _key(sentence: str) -> str:
    """A sentence that states a value (`... is X`, `key: X`, `key = X`) keys by its words up
    to the value, the value blanked: a later sentence that says the same of the same subject
    with another value (a number, a date, an id updated) replaces it. Other sentences key by
    themselves (a repeat keeps only its latest place): output lines such as
    `tests/x.py::test_a FAILED` or `12:30:01 ...` state no value."""
    lowered = sentence.lower()
    found = _STATES.search(lowered)
    if found is None:
        return lowered
    return lowered[: found.end()] + _VALUE.sub("#", lowered[found.end() :])


def updates(
    texts: Sequence[SpanText], stated: str, budget: int, count: Callable[[str], int]
) -> str:
    """The sentences of `texts` that change what `stated` (an earlier digest) says: each one
    that states the same thing of the same subject (the same key), or a correction naming one
    of its values, names or identifiers; the latest of each, best first within `budget`,
    written in span order. "" when none. What keeps a frozen summary from showing a value
    without its correction."""
    lines = [line.removeprefix("- ") for line in stated.splitlines()]
    keys = {_key(_unsourced(line)) for line in lines}
    marks = set().union(*(_marks(line) for line in lines)) if lines else set()
    changed = [
        c for c in _ranked(texts, frozenset())
        if _key(_unsourced(c.sentence)) in keys
        or (_CORRECTION.search(c.sentence) and _marks(_unsourced(c.sentence)) & marks)
    ]
    kept: list[_Candidate] = []
    spent = 0
    for candidate in changed:
        cost = count(f"- {candidate.sentence}") + 1
        if spent + cost <= budget:
            kept.append(candidate)
            spent += cost
    return "\n".join(f"- {c.sentence}" for c in sorted(kept, key=lambda c: c.position))


def _unsourced(line: str) -> str:
    """A digest line without its `[source] ` label."""
    return re.sub(r"^\[[^\]]*\] ", "", line)


def _marks(sentence: str) -> set[str]:
    """What identifies a sentence's subject or value: its numbers, names and identifiers."""
    found = {m.group(0) for pattern in (_NAME, _IDENT, _PATH) for m in pattern.finditer(sentence)}
    return _values(sentence) | found


# Shared with the summary's sections (present.py) and the fact ledger (facts.py).
values = _values
unsourced = _unsourced
CORRECTION = _CORRECTION
COMMAND = _COMMAND
DETAIL = _DETAIL
ERROR = _ERROR
