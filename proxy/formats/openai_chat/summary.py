"""The summarizer's call in Chat Completions: the request it sends and what it reads back."""

from __future__ import annotations

from typing import Any

from proxy.formats.openai_chat.fields import content_text


def summary_request(model: str, instructions: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One non-streamed, deterministic call: the instructions as the system message."""
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": instructions},
            {"role": "user", "content": prompt},
        ],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": False,
    }


def summary_answer(data: Any) -> tuple[str, str, dict[str, int]] | None:
    """(the first choice's text, the answering model, integer usage counts), or None when the
    answer has no text."""
    if not isinstance(data, dict):
        return None
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    text = content_text(message) if isinstance(message, dict) else None
    if not text:
        return None
    model = data.get("model")
    usage = data.get("usage")
    counts = (
        {k: v for k, v in usage.items() if isinstance(k, str) and type(v) is int}
        if isinstance(usage, dict)
        else {}
    )
    return text, model if isinstance(model, str) else "", counts
