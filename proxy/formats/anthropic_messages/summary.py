"""The summarizer's call in Anthropic Messages: the request it sends and what it reads back.

Used when the summarizer's upstream speaks Messages natively (kind `anthropic`, which serves
`/messages` only). The
answer's usage is read as the chat adapter's names (`prompt_tokens`, `completion_tokens`), so
the manifest and the metrics count a summarizer call the same way whatever its upstream.
"""

from __future__ import annotations

from typing import Any

from proxy.formats.anthropic_messages.fields import block_type, blocks_of
from proxy.formats.anthropic_messages.usage import prompt_tokens
from proxy.formats.common import int_value


def summary_request(model: str, instructions: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One non-streamed, deterministic call: the instructions as the system prompt."""
    return {
        "model": model,
        "system": instructions,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": False,
    }


def summary_bodies(model: str, instructions: str, prompt: str, limit: int) -> list[dict[str, Any]]:
    """A summarizer call's one body (Messages have no structured output to ask for)."""
    return [summary_request(model, instructions, prompt, limit)]


def summary_answer(data: Any) -> tuple[str, str, dict[str, int]] | None:
    """(the answer's text blocks joined, the answering model, usage as prompt/completion
    tokens), or None when the answer has no text (thinking blocks are not the answer)."""
    if not isinstance(data, dict):
        return None
    texts = [
        block["text"] for block in blocks_of(data)
        if block_type(block) == "text" and isinstance(block.get("text"), str)
    ]
    text = "".join(texts)
    if not text:
        return None
    model = data.get("model")
    return text, model if isinstance(model, str) else "", _usage(data.get("usage"))


def _usage(usage: object) -> dict[str, int]:
    counts: dict[str, int] = {}
    prompt = prompt_tokens(usage)
    if prompt is not None:
        counts["prompt_tokens"] = prompt
    output = int_value(usage.get("output_tokens")) if isinstance(usage, dict) else None
    if output is not None:
        counts["completion_tokens"] = output
    return counts
