"""The scenarios of the probe evaluation by category (`bench.quality.categories`).

Each is an existing scenario's conversation (B research, C JSON tool chains, D coding) without
its closing recap question, with seeded decisions inserted between exchanges, then a last user
request (the next step) that the agent has started on with two small tool exchanges. The
original generators are untouched: every addition comes from a `Gen` of its own label.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bench.quality.gen import research
from bench.quality.gen_tools import coding_agent, tool_chains
from bench.quality.text import Gen, Probe, assistant, body, fetch, tool_schema, user

CATEGORIES = ("facts", "artifacts", "continuation", "decisions")
MAX_ARTIFACT_PROBES = 8
MAX_ARGUMENT_CHARS = 120
DECISIONS = 3
_ACTIONS = (
    "pin the release of",
    "roll back",
    "freeze the schema of",
    "route the retries through",
    "drop the legacy cache of",
    "move the nightly job of",
)
LOG_LINES = 320
SOURCES = {"coding": coding_agent, "research": research, "json-logs": tool_chains}


@dataclass
class CategoryCase:
    """One prepared-prompt input and its probes per category."""

    key: str
    seed: int
    body: dict[str, Any]
    probes: dict[str, list[Probe]]


def build(key: str, seed: int) -> CategoryCase:
    source = SOURCES[key](seed)
    request = source.requests[-1]
    messages = list(request.body["messages"][:-1])  # without the closing recap question
    gen = Gen(seed, f"categories:{key}")
    facts = list(request.probes)
    tools = [*(request.body.get("tools") or []), _tool("run_check", "check")]
    if key == "json-logs":
        facts.append(_insert_log(gen, messages))
        tools.append(_tool("tail_log", "service"))
    decisions = _insert_decisions(gen, messages)
    artifacts = artifact_probes(messages)
    continuation = _next_step(gen, messages)
    probes = {
        "facts": facts,
        "artifacts": artifacts,
        "continuation": [continuation],
        "decisions": decisions,
    }
    return CategoryCase(key, seed, body(messages, tools), probes)


def build_all(seed: int) -> list[CategoryCase]:
    return [build(key, seed) for key in SOURCES]


def _tool(name: str, argument: str) -> dict[str, Any]:
    return tool_schema(name, f"{name} by {argument} (bench stand-in).", **{argument: "string"})


def _insert_log(gen: Gen, messages: list[dict[str, Any]]) -> Probe:
    """A service log (runs of lines differing only in numbers) with one planted error line,
    read early in the session; the probe asks for the error's code."""
    code = gen.ident("GW", 5)
    customer = gen.ident("CUS", 6)
    planted = gen.rng.randint(LOG_LINES // 3, 2 * LOG_LINES // 3)
    lines = []
    for n in range(LOG_LINES):
        stamp = f"2026-11-30T08:{n // 60:02d}:{n % 60:02d}Z"
        if n == planted:
            lines.append(f"{stamp} ERROR gateway rejected {customer} with code {code}")
        else:
            ms = gen.rng.randint(3, 90)
            lines.append(f"{stamp} INFO worker-{n % 4} processed batch {1000 + n} in {ms} ms")
    spots = _boundaries(messages)
    at = spots[len(spots) // 4]
    messages[at:at] = fetch(gen, "tail_log", [{"service": "payments-gateway"}], ["\n".join(lines)])
    return Probe(f"With which code did the gateway reject {customer}?", code)


def _boundaries(messages: list[dict[str, Any]]) -> list[int]:
    """Indices where a new user message fits: after a tool result or a plain assistant reply
    (never inside a tool exchange), never before the first user message."""
    out = []
    for i in range(2, len(messages) + 1):
        before = messages[i - 1]
        after = messages[i] if i < len(messages) else None
        closes = before["role"] == "tool" or (
            before["role"] == "assistant" and not before.get("tool_calls")
        )
        if closes and (after is None or after["role"] != "tool"):
            out.append(i)
    return out


def _insert_decisions(gen: Gen, messages: list[dict[str, Any]]) -> list[Probe]:
    """DECISIONS user decisions (each acknowledged) in the first two thirds of the history."""
    spots = _boundaries(messages)
    spots = spots[: max(1, 2 * len(spots) // 3)]
    chosen = sorted(gen.rng.sample(spots, min(DECISIONS, len(spots))), reverse=True)
    probes = []
    for at in chosen:
        subject = gen.codename()
        statement = f"we decided to {gen.rng.choice(_ACTIONS)} {subject}"
        reason = gen.sentence()
        messages[at:at] = [
            user(f"Decision for the record: {statement}. {reason}"),
            assistant(f"Understood, {statement}."),
        ]
        probes.append(Probe(f"What did we decide about {subject}?", statement))
    return probes[::-1]


def artifact_probes(messages: list[dict[str, Any]]) -> list[Probe]:
    """Files, ids, patterns and commands the calls touched: their short string arguments,
    distinct, at most MAX_ARTIFACT_PROBES spread over the session."""
    values: list[tuple[str, str]] = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            name = call["function"]["name"]
            for value in json.loads(call["function"]["arguments"]).values():
                short = isinstance(value, str) and 3 <= len(value) <= MAX_ARGUMENT_CHARS
                if short and value not in (v for _, v in values):
                    values.append((name, value))
    step = max(1, len(values) // MAX_ARTIFACT_PROBES)
    picked = values[::step][:MAX_ARTIFACT_PROBES]
    return [Probe(f"Which argument did {name} get earlier?", v) for name, v in picked]


def _next_step(gen: Gen, messages: list[dict[str, Any]]) -> Probe:
    """The last user request, then the agent's first two small exchanges on it."""
    ticket = gen.ident("STEP", 5)
    request = (
        f"Next step ({ticket}): re-run the checks for {gen.codename()}, compare them with the "
        f"numbers above and write the result to notes/{ticket.lower()}.md. {gen.sentence()}"
    )
    messages.append(user(request))
    for _ in range(2):
        rows = [{"check": gen.codename(), "status": "ok", "ms": gen.rng.randint(5, 900)}
                for _ in range(6)]
        messages += fetch(gen, "run_check", [{"check": gen.codename()}], [json.dumps(rows)])
    return Probe("What did the user ask to do next?", request)

