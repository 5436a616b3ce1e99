"""The dry-run snapshot's large requests (`--large`): bodies of 1 MB and more, which the proxy
reads, parses and prepares in worker threads and in slices (`proxy.jsonio.slices`), so that a
change there is checked for byte-identical answers too.

Each chat body is also sent as Anthropic Messages and as a Responses request. A large answer is
recorded as its sha256 and size (`recorded`), not as its bytes. Deterministic; no proxy imports.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from bench.quality.dryrun_bodies import agent, call, calls_msg, enc, result, text
from bench.quality.dryrun_formats import MESSAGES, RESPONSES, as_messages, as_responses

PREFIX = "large:"
RECORDED_WHOLE_BYTES = 100_000
"""Answers up to this size are recorded as they are, larger ones by their digest."""
_ODD = 'é中😀 "\\/\n\t{}[],:\u2028'


def large_requests() -> list[tuple[str, str, bytes]]:
    """(label, path, body) of each large request, in each format."""
    out: list[tuple[str, str, bytes]] = []
    for label, body, ascii_only in _chat_bodies(random.Random(11)):
        chat = json.dumps(body, separators=(",", ":"), ensure_ascii=ascii_only).encode()
        out.append((f"{PREFIX}{label}", "/v1/context/prepare", chat))
        out.append((f"{PREFIX}messages:{label}", MESSAGES, enc(as_messages(body))))
        out.append((f"{PREFIX}responses:{label}", RESPONSES, enc(as_responses(body))))
    return out


def recorded(label: str, data: bytes) -> bytes:
    """What the snapshot keeps of an answer: a large request's large answer by its digest."""
    if not label.startswith(PREFIX) or len(data) <= RECORDED_WHOLE_BYTES:
        return data
    digest = hashlib.sha256(data).hexdigest()
    return json.dumps({"sha256": digest, "bytes": len(data)}, separators=(",", ":")).encode()


def _odd_text(rng: random.Random, chars: int) -> str:
    """Log-ish text with escapes, non-ASCII, emoji and JSON punctuation sprinkled in."""
    plain = text(rng, chars)
    return "".join(c if rng.random() > 0.02 else rng.choice(_ODD) for c in plain)[:chars]


def _chat_bodies(rng: random.Random) -> list[tuple[str, dict[str, Any], bool]]:
    """(label, chat body, written with every non-ASCII character escaped)."""
    result_15 = agent(rng, 3, (500, 4000), names=["read_file", "grep"])
    _add_result(result_15, "call_big", _odd_text(rng, 1_500_000))
    escaped = agent(rng, 2, (500, 2000), names=["read_file"])
    _add_result(escaped, "call_esc", _odd_text(rng, 3_000_000))
    parts = agent(rng, 2, (500, 2000), names=["grep"])
    _add_result(parts, "call_parts", [{"type": "text", "text": _odd_text(rng, 500_000)}] * 4)
    user = agent(rng, 2, (500, 2000), names=["grep"])
    user["messages"].insert(-1, {"role": "user", "content": _odd_text(rng, 1_200_000)})
    many = agent(rng, 2_500, (200, 600), names=["read_file", "grep", "run_tests"])
    over = agent(rng, 1, (500, 1000), names=["read_file"])
    _add_result(over, "call_over", text(rng, 21_000_000))  # over artifacts.max_chars (20M)
    return [
        ("tool-result-1.5mb", result_15, False),
        ("tool-result-3mb-escaped", escaped, True),
        ("content-parts-2mb", parts, False),
        ("user-message-1.2mb", user, False),
        ("many-messages", many, False),
        ("tool-result-21mb", over, False),
    ]


def _add_result(body: dict[str, Any], call_id: str, content: Any) -> None:
    """A call and its result before the body's last user message."""
    body["messages"][-1:-1] = [
        calls_msg([call(call_id, "read_file", {"path": "dump.log"})]),
        result(call_id, content),
    ]
