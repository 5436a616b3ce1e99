"""Scenario F: an agent session with large turns, one request per turn.

Every turn is a short instruction, one tool call whose result is a 6.8-7.9 KB file, grep output or
test log (under the default offload threshold of 8,000 chars, so it stays inline until cleared),
and a short answer: about 2,200 tokens a turn. Facts are stated now and then in the instruction or
planted inside a result, and some are corrected later; each request's probes are the facts stated
so far (as in E). It is evaluated at the larger budgets of `bench.quality.run.AGENT_BUDGETS`,
where a turn is 6-25% of the budget: the case where cuts sized for small turns break the prompt
prefix every turn or two.
"""

from __future__ import annotations

from typing import Any

from bench.quality.gen_files import pytest_log, python_file
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
    same_kind,
    system,
    tool_schema,
    user,
)

AGENT_KEY = "F"
AGENT_TITLE = "agent session, ~2k-token turns (7 KB tool results)"
RESULT_CHARS = (6_800, 7_900)

_TOOLS = [
    tool_schema("read_file", "Read a file.", path="string"),
    tool_schema("grep", "Search the repository.", pattern="string"),
    tool_schema("run_tests", "Run the test suite.", selector="string"),
]


def agent_session(seed: int, turns: int = 80) -> Scenario:
    """One request per turn; each request's probes are the facts stated so far."""
    gen = Gen(seed, AGENT_KEY)
    pkg = gen.codename().lower()
    facts: list[Fact] = []
    messages: list[dict[str, Any]] = [
        system(
            "You are a coding agent in a long session on one repository. Use the tools; "
            "later details override earlier ones."
        ),
        user(f"We are hardening the {pkg} package today, step by step. {gen.paragraph(2)}"),
    ]
    scenario = Scenario(AGENT_KEY, AGENT_TITLE, seed)
    for t in range(turns):
        if t:
            messages.append(user(_instruction(gen, facts)))
        messages += _tool_turn(gen, pkg, facts)
        scenario.requests.append(Request(body(list(messages), _TOOLS), [f.probe() for f in facts]))
        messages.append(assistant(gen.paragraph(gen.rng.randint(10, 16))))
    return scenario


def _instruction(gen: Gen, facts: list[Fact]) -> str:
    parts = [gen.paragraph(gen.rng.randint(2, 4))]
    roll = gen.rng.random()
    if roll < 0.10:
        fact = new_fact(gen)
        facts.append(fact)
        parts.append(fact.statement())
    elif roll < 0.15 and facts:
        fact = gen.rng.choice(facts)
        parts.append(fact.correct(same_kind(gen, fact)))
    return " ".join(parts)


def _tool_turn(gen: Gen, pkg: str, facts: list[Fact]) -> list[dict[str, Any]]:
    """One tool exchange with a result of RESULT_CHARS; sometimes a new fact inside it."""
    planted: list[str] = []
    if gen.rng.random() < 0.08:
        fact = new_fact(gen)
        facts.append(fact)
        planted.append(f"# NOTE: {fact.statement()}")
    size = gen.rng.randint(*RESULT_CHARS)
    kind = gen.rng.choice(["read_file", "read_file", "grep", "run_tests"])
    if kind == "read_file":
        path = f"src/{pkg}/{gen.codename().lower()}.py"
        text = python_file(gen, path, [], 60)
        call: dict[str, Any] = {"path": path}
    elif kind == "grep":
        text = "\n".join(
            f"src/{pkg}/{gen.words(1)}.py:{gen.rng.randint(1, 900)}:    {gen.words(6)}"
            for _ in range(size // 50)
        )
        call = {"pattern": gen.words(1)}
    else:
        tests = [f"tests/test_{pkg}.py::test_{gen.codename().lower()}" for _ in range(size // 40)]
        text = pytest_log(gen, tests, None, "")
        call = {"selector": f"tests/test_{pkg}.py"}
    return fetch(gen, kind, [call], [_fit(gen, text, size, planted)])


def _fit(gen: Gen, text: str, size: int, planted: list[str]) -> str:
    """`text` cut to about `size` chars at a line end, `planted` lines put in its middle third
    (outside any preview's head and tail)."""
    lines = text.splitlines()
    kept: list[str] = []
    total = sum(len(line) + 1 for line in planted)
    for line in lines:
        if total + len(line) + 1 > size:
            break
        kept.append(line)
        total += len(line) + 1
    at = gen.rng.randint(len(kept) // 3, 2 * len(kept) // 3)
    return "\n".join(kept[:at] + planted + kept[at:])


TITLES_WITH_AGENT = {**TITLES, AGENT_KEY: AGENT_TITLE}
