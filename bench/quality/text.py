"""Seeded building blocks for the policy-quality scenarios: random text, names, ids, messages,
exchanges, facts and the scenario titles.

Everything comes from one `random.Random` per scenario, so the same seed gives byte-identical
conversations. Codenames, ids and amounts are drawn at random (and never repeat within a
scenario), so no answer can be guessed from the question or from another conversation.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MODEL = "gpt-4.1"
"""Counted with o200k_base; chosen because no preset has a `models:` override matching it."""

_WORD_TEXT = (
    "system service request response latency budget quarter forecast review design migration "
    "cluster region replica storage index cache queue worker schedule deadline vendor contract "
    "invoice payment customer account ticket incident outage report summary metric threshold "
    "alert dashboard pipeline release version feature branch module interface schema field "
    "record table column value range window estimate target baseline variance trend signal "
    "sample dataset analysis method result finding evidence source section appendix figure "
    "team owner review meeting agenda decision action follow-up risk issue blocker dependency "
    "plan milestone scope requirement constraint tradeoff option proposal approval policy "
    "the a an of to in on for with by from at as and or but not only also still then now "
    "later earlier today this that these those our their its some many few most each every "
    "is are was were be been has have had will would should could may might can must "
    "increase decrease improve reduce stabilise measure compare validate verify confirm "
    "expect observe notice assume prefer suggest recommend propose agree discuss update "
    "quickly carefully roughly nearly mostly partly fully clearly slightly significantly "
    "north south east west central primary secondary internal external manual automatic"
)
_SYLLABLE_TEXT = (
    "ka ve lo tri mon dax qu zel ori nym bra sol fen gar hul ix jor kel lum mir nox pra "
    "ryn sev tal ush vor wex yor zan cor del eph fal gon hex ist jun"
)
_WORDS = _WORD_TEXT.split()
_SYLLABLES = _SYLLABLE_TEXT.split()
_CURRENCIES = ("EUR", "USD", "GBP", "CHF", "JPY")
_ALPHANUM = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


class Gen:
    """A scenario's random source; every `unique*` value is new within the scenario."""

    def __init__(self, seed: int, label: str) -> None:
        self.rng = random.Random(f"ctxproxy-quality:{label}:{seed}")
        self._used: set[str] = set()
        self._calls = 0

    def unique(self, make: Callable[[], str]) -> str:
        while True:
            value = make()
            if value not in self._used:
                self._used.add(value)
                return value

    def codename(self) -> str:
        def make() -> str:
            return "".join(self.rng.choice(_SYLLABLES) for _ in range(3)).upper()

        return self.unique(make)

    def ident(self, prefix: str, length: int = 6) -> str:
        return self.unique(
            lambda: f"{prefix}-" + "".join(self.rng.choice(_ALPHANUM) for _ in range(length))
        )

    def amount(self) -> str:
        def make() -> str:
            whole = self.rng.randint(1_000, 999_999)
            return f"{whole:,}.{self.rng.randint(0, 99):02d} {self.rng.choice(_CURRENCIES)}"

        return self.unique(make)

    def number(self, low: int, high: int, unit: str = "") -> str:
        return self.unique(lambda: f"{self.rng.randint(low, high)}{unit}")

    def percent(self) -> str:
        return self.unique(lambda: f"{self.rng.uniform(80, 99.99):.2f}%")

    def date(self) -> str:
        return self.unique(
            lambda: (
                f"20{self.rng.randint(31, 39)}-{self.rng.randint(1, 12):02d}-"
                f"{self.rng.randint(1, 28):02d}"
            )
        )

    def person(self) -> str:
        def make() -> str:
            first = "".join(self.rng.choice(_SYLLABLES) for _ in range(2)).capitalize()
            last = "".join(self.rng.choice(_SYLLABLES) for _ in range(3)).capitalize()
            return f"{first} {last}"

        return self.unique(make)

    def hexid(self, chars: int = 12) -> str:
        return self.unique(lambda: f"{self.rng.getrandbits(chars * 4):0{chars}x}")

    def call_id(self) -> str:
        self._calls += 1
        return f"call_{self._calls:03d}{self.hexid(16)}"

    # -- filler text ---------------------------------------------------------------------------

    def words(self, n: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(n))

    def sentence(self) -> str:
        text = self.words(self.rng.randint(8, 22))
        return text[0].upper() + text[1:] + "."

    def paragraph(self, sentences: int | None = None) -> str:
        count = sentences if sentences is not None else self.rng.randint(3, 7)
        return " ".join(self.sentence() for _ in range(count))

    def prose(self, chars: int) -> str:
        parts: list[str] = []
        size = 0
        while size < chars:
            part = self.paragraph()
            parts.append(part)
            size += len(part) + 2
        return "\n\n".join(parts)


# -- the OpenAI chat format ----------------------------------------------------------------------


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: dict[str, Any]


def tool_calls(calls: list[Call], content: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in calls
        ],
    }


def tool_result(call: Call, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": content}


def exchange(
    calls: list[Call], results: list[str], note: str | None = None
) -> list[dict[str, Any]]:
    """An assistant message with tool calls plus one result per call, in call order."""
    pairs = zip(calls, results, strict=True)
    return [tool_calls(calls, note), *(tool_result(c, r) for c, r in pairs)]


def fetch(
    gen: Gen, name: str, args: list[dict[str, Any]], results: list[str]
) -> list[dict[str, Any]]:
    """One exchange: a call of `name` per argument set, each answered by its result."""
    calls = [Call(gen.call_id(), name, a) for a in args]
    return exchange(calls, results)


def tool_schema(name: str, description: str, **params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": t} for k, t in params.items()},
                "required": list(params),
            },
        },
    }


# -- scenarios and probes -------------------------------------------------------------------------

TITLES = {
    "A": "long chatter, facts stated early, some corrected",
    "B": "research agent reading long reports",
    "C": "multi-step tool chains, verbose JSON",
    "D": "coding agent: file reads, grep, test logs",
    "E": "conversation growing turn by turn",
}
"""The scenarios of `gen` and `gen_tools` (F, the agent session, is `gen_agent`'s)."""


@dataclass(frozen=True)
class Probe:
    question: str
    evidence: str
    """The exact string that answers the question: the current value, never a superseded one."""
    superseded: tuple[str, ...] = ()
    """Earlier values of the same fact; seeing only these would mislead the model."""


@dataclass
class Request:
    body: dict[str, Any]
    probes: list[Probe]


@dataclass
class Scenario:
    key: str
    title: str
    seed: int
    requests: list[Request] = field(default_factory=list)

    @property
    def growing(self) -> bool:
        return len(self.requests) > 1


def body(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"model": MODEL, "messages": messages}
    if tools:
        out["tools"] = tools
    return out


@dataclass
class Fact:
    """A fact about a subject whose value may be corrected later in the conversation."""

    subject: str
    attribute: str
    value: str
    history: list[str] = field(default_factory=list)

    def statement(self) -> str:
        return f"For the record, the {self.attribute} of {self.subject} is {self.value}."

    def correct(self, value: str) -> str:
        self.history.append(self.value)
        old, self.value = self.value, value
        return (
            f"Correction on {self.subject}: its {self.attribute} changed. Please use {value} "
            f"from now on; the earlier figure {old} is out of date."
        )

    def probe(self) -> Probe:
        return Probe(
            f"What is the current {self.attribute} of {self.subject}?",
            self.value,
            tuple(self.history),
        )


def new_fact(gen: Gen, subject: str | None = None) -> Fact:
    kinds: list[tuple[str, Callable[[], str]]] = [
        ("approved budget", gen.amount),
        ("launch date", gen.date),
        ("accountable owner", gen.person),
        ("contract number", lambda: gen.ident("CTR", 7)),
        ("latency objective", lambda: gen.number(40, 990, " ms")),
        ("escalation ticket", lambda: gen.ident("TKT", 6)),
        ("settlement amount", gen.amount),
        ("vendor codename", gen.codename),
    ]
    attribute, make = gen.rng.choice(kinds)
    return Fact(subject or gen.codename(), attribute, make())


def numbered(questions: list[Probe]) -> str:
    return "\n".join(f"{i}. {p.question}" for i, p in enumerate(questions, 1))


def same_kind(gen: Gen, fact: Fact) -> str:
    """A new value shaped like the fact's current one."""
    value = fact.value
    if value.endswith(("EUR", "USD", "GBP", "CHF", "JPY")):
        return gen.amount()
    if value.endswith(" ms"):
        return gen.number(40, 990, " ms")
    if value[:2] == "20" and value.count("-") == 2:
        return gen.date()
    if "-" in value:
        return gen.ident(value.split("-")[0], len(value.split("-")[1]))
    if " " in value:
        return gen.person()
    return gen.codename()
