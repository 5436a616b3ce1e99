"""The round-two run's fake upstream and what it received.

One `FakeUpstream` of the tests serves the proxies of the nesting, anonymous and injection
phases, as an OpenAI upstream (`/v1`) and an Anthropic one (its origin): 401 to a made-up
credential (as a provider would), a summary full of injected text to the proxy's summarizer,
else the fakes' default answers (the compression and calibration phases bring their own).
`pair_findings` checks every body it received for broken tool pairs, per format.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Sequence

from fakes import Recorded, Reply, completion, error_reply
from fakes.anthropic import anthropic_message, default_anthropic_for, text_block
from fakes.defaults import default_for

from bench.hostile.cases import pair_problems as chat_pair_problems
from bench.hostile.messages import pair_problems as messages_pair_problems
from bench.hostile.responses import item_pair_problems
from proxy.engine.steps.summarize.summarizer import INSTRUCTIONS

MADE_UP = "made-up"
"""Credentials holding this are refused by the fake upstream (401)."""


SUMMARIZER_ASKS = INSTRUCTIONS.split('"', 1)[0]
"""The start of the proxy's instructions to a summarizer (before any character JSON escapes)."""


def answering(summary: str) -> Callable[[Recorded], Reply]:
    """The fake's reply to each request (`summary`: what the summarizer is answered)."""

    def reply(record: Recorded) -> Reply:
        credentials = " ".join(record.headers.get(h, "") for h in ("Authorization", "x-api-key"))
        if MADE_UP in credentials:
            return error_reply(401)
        anthropic = record.path.startswith("/v1/messages")
        if SUMMARIZER_ASKS in record.body.decode("utf-8", "replace"):
            return anthropic_message([text_block(summary)]) if anthropic else completion(summary)
        return default_anthropic_for(record) if anthropic else default_for(record)

    return reply


def _problems(record: Recorded) -> list[str] | None:
    """The broken pairs of one body; None when it carries no conversation to check."""
    try:
        body = json.loads(record.body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(body, dict):
        return None
    if record.path == "/v1/chat/completions" and isinstance(body.get("messages"), list):
        return chat_pair_problems(body["messages"])
    if record.path.startswith("/v1/messages") and isinstance(body.get("messages"), list):
        return messages_pair_problems(body["messages"])
    if record.path == "/v1/responses" and isinstance(body.get("input"), list):
        return item_pair_problems(body["input"])
    return None


def pair_findings(records: Sequence[Recorded]) -> tuple[int, collections.Counter[str]]:
    """(bodies checked, the first problem of each broken body by its path and kind)."""
    checked, broken = 0, collections.Counter[str]()
    for record in records:
        problems = _problems(record)
        if problems is None:
            continue
        checked += 1
        if problems:
            broken[f"{record.path}: {problems[0].split(': ', 1)[-1]}"] += 1
    return checked, broken
