"""Prompt tokens the llama.cpp server evaluated, per conversation, from its own log, beside the
perfect-cache floor of the same conversation.

llama-cpp-python keeps one KV cache and, for each request, evaluates only the prompt tokens
after the longest prefix it shares with what the cache holds (`Llama.generate: H prefix-match
hit, remaining M prompt tokens to eval`); every request logs `prompt eval time = ... / N tokens`
with the tokens it evaluated. The driver requests `GET /v1/models?ctxproxy_variant=<label>`
from the server before each conversation, so uvicorn's access line splits the log by
conversation. The proxy's own calls for a conversation (a summarizer on the same server) fall in
its part: the server evaluated them for it.

The floor: a perfect cache evaluates each message once. For each request, the tokens of what it
adds to the previous request's prompt plus the previous answer: the new user message in the
model's chat template, the generation prompt, and the 2 tokens that close the previous answer
(the answer itself was evaluated while it was generated).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

MARKER_PATH = "/models?ctxproxy_variant="
_MARKER = re.compile(r'"GET /v1/models\?ctxproxy_variant=([^ "]+) HTTP')
_EVALUATED = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
ANSWER_CLOSE = 2
"""`<|im_end|>` and the newline after an answer, which the template adds to the next prompt."""


class Encoder(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> Any: ...


def evaluated_by_label(lines: Iterable[str]) -> dict[str, int]:
    """Prompt tokens evaluated after each marker, by its label (before any marker: dropped)."""
    out: dict[str, int] = {}
    label: str | None = None
    for line in lines:
        marker = _MARKER.search(line)
        if marker:
            label = marker.group(1)
            out.setdefault(label, 0)
            continue
        evaluated = _EVALUATED.search(line)
        if evaluated and label is not None:
            out[label] += int(evaluated.group(1))
    return out


def evaluated_from_log(path: str | Path) -> dict[str, int]:
    with Path(path).open(encoding="utf-8", errors="replace") as lines:
        return evaluated_by_label(lines)


def framed(role: str, content: str) -> str:
    """A message in SmolLM2's chat template (`<|im_start|>role\\ncontent<|im_end|>\\n`)."""
    return f"<|im_start|>{role}\n{content}<|im_end|>\n"


def floor_tokens(encoder: Encoder, system: str, users: list[str]) -> int:
    """The perfect-cache floor of a conversation sending `users` one per request."""
    def count(text: str) -> int:
        return len(encoder.encode(text, add_special_tokens=False).ids)

    prompt = count("<|im_start|>assistant\n")
    total = count(framed("system", system))
    for turn, content in enumerate(users):
        total += count(framed("user", content)) + prompt + (ANSWER_CLOSE if turn else 0)
    return total
