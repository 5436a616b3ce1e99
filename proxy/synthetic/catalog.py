"""The tool definitions a policy deferred, and a lexical ranking of them by what a model asks for.

A `ToolEntry` is one deferrable definition in neutral terms (its name, description and parameter
names, read by the client's format) with the client's own wire object, sent as it came once the
model loads it. The ranking is BM25 over the words of the name (split at `_`, `-`, `.`, `/` and
camelCase), the description and the parameter names: no model, nothing downloaded, linear in the
catalog's size.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_INDEXED_CHARS = 4_000
"""Characters of a description that are ranked (a hostile 1 MB description costs no more)."""
MAX_LINE_CHARS = 160
"""The longest one-line description a result carries."""
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|[0-9]+|[a-z]+")
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_K1 = 1.2
_B = 0.75
_NAME_WEIGHT = 3
"""A word of the name counts as this many words of the description."""
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "with",
        "you",
        "your",
        "can",
        "will",
        "into",
        "all",
        "any",
    ]
)


@dataclass(frozen=True)
class ToolEntry:
    """One deferrable tool definition."""

    name: str
    description: str
    parameters: tuple[str, ...]
    """The names of its parameters (nested ones included)."""
    tool: Any
    """The client's definition as it came (what is sent once the tool is loaded), but for a
    Messages `cache_control` breakpoint (`formats.tool_defs`)."""
    calls: tuple[str, ...] = ()
    """Names its calls go by besides `name` (a namespace's tools)."""

    def answers_to(self, name: str) -> bool:
        return name == self.name or name in self.calls


def words(text: str) -> list[str]:
    """Lower-case words of `text`, `createPullRequest` and `create_pull_request` alike, each
    stemmed lightly (`files` and `file` alike)."""
    return [_stem(w) for word in _WORD.findall(text) if (w := word.lower()) not in _STOP]


def _stem(word: str) -> str:
    """Plurals and -ing/-ed endings off (`branches`, `files`, `running` -> `branch`, `file`,
    `runn`): words of one root meet, nothing more."""
    if len(word) <= 4:
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def one_line(description: str) -> str:
    """The first line of a description, at most `MAX_LINE_CHARS` characters."""
    line = description.strip().split("\n", 1)[0].strip()
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 3].rstrip() + "..."


def _document(entry: ToolEntry) -> Counter[str]:
    names = words(entry.name) + [w for call in entry.calls for w in words(call)]
    text = entry.description[:MAX_INDEXED_CHARS] + " " + " ".join(entry.parameters)
    counts = Counter(words(text))
    for word in names:
        counts[word] += _NAME_WEIGHT
    return counts


@dataclass(frozen=True)
class ToolCatalog:
    """The deferred tools of one request, in the client's order."""

    entries: tuple[ToolEntry, ...]
    _index: list[Counter[str]] = field(default_factory=list, compare=False, repr=False)
    _names: dict[str, ToolEntry] = field(default_factory=dict, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, name: str) -> ToolEntry | None:
        """The entry called `name` (or holding a tool of that name)."""
        if not self._names:
            for entry in reversed(self.entries):  # the first entry wins a name
                self._names.update(dict.fromkeys((entry.name, *entry.calls), entry))
        return self._names.get(name)

    def ranked(self, query: str, limit: int, exclude: Sequence[str] = ()) -> list[ToolEntry]:
        """The `limit` entries that match `query` best (BM25), ties in the client's order;
        an exact tool name in the query ranks that tool first."""
        terms = set(words(query))
        if not terms or limit <= 0:
            return []
        index = self._documents()
        scores = _bm25(index, terms)
        named = set(_NAME.findall(query))
        for i, entry in enumerate(self.entries):
            if entry.name in named:
                scores[i] += 1_000.0
        order = sorted(
            (i for i, score in enumerate(scores) if score > 0),
            key=lambda i: (-scores[i], i),
        )
        skip = set(exclude)
        return [self.entries[i] for i in order if self.entries[i].name not in skip][:limit]

    def _documents(self) -> list[Counter[str]]:
        if not self._index:  # built once per request; two threads at most build it twice
            self._index[:] = [_document(entry) for entry in self.entries]
        return self._index

    def prefixes(self, most: int = 8) -> list[str]:
        """The name prefixes of the catalog (`github_*`) in the order they first come (stable
        while a group keeps a tool), at most `most` of them."""
        seen: dict[str, None] = {}
        for entry in self.entries:
            seen.setdefault(_prefix(entry.name))
            if len(seen) > most:
                break
        return list(seen)[:most]


def _prefix(name: str) -> str:
    for separator in ("__", "_", "-", ".", "/"):
        head, found, _ = name.partition(separator)
        if found and head:
            return f"{head}{separator}*"
    return name


def _bm25(index: list[Counter[str]], terms: set[str]) -> list[float]:
    n = len(index)
    lengths = [sum(doc.values()) for doc in index]
    average = (sum(lengths) / n) if n else 1.0
    scores = [0.0] * n
    for term in terms:
        having = [i for i, doc in enumerate(index) if term in doc]
        if not having:
            continue
        idf = math.log(1 + (n - len(having) + 0.5) / (len(having) + 0.5))
        for i in having:
            tf = index[i][term]
            norm = tf + _K1 * (1 - _B + _B * lengths[i] / (average or 1.0))
            scores[i] += idf * tf * (_K1 + 1) / norm
    return scores
