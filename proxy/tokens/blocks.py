"""Anthropic content blocks in a count: an image at its largest cost, a document by its pages (or
its text), a tool result by its content, a tool call by its name and input. Their base64 data is
never counted as text (a 1 MB image is not 400,000 tokens)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any

ANTHROPIC_IMAGE_TOKENS = 1600  # Anthropic: (w x h) / 750, images are resized to about 1.15 MP
DOCUMENT_PAGE_TOKENS = 3000  # a PDF page: its text plus the page image (Anthropic's PDF guide)
BLOCK_COSTS = {"image": 0, "document": 0, "tool_result": 3, "tool_use": 3}
"""The block types counted here, with their framing."""
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?!s)")


def pdf_pages(data: str) -> int:
    """Pages of a base64 PDF (its `/Type /Page` objects; at least 1; 1 when it does not decode)."""
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return 1
    return max(1, len(_PDF_PAGE.findall(raw)))


def block_tokens(
    kind: str,
    block: dict[str, Any],
    count_text: Callable[[str], int],
    count_json: Callable[[Any], int],
    count_part: Callable[[Any], int],
) -> int:
    """The tokens of one block of a type in `BLOCK_COSTS` (the counter's own text, JSON and
    content-part counts passed in)."""
    if kind == "image":
        return ANTHROPIC_IMAGE_TOKENS
    if kind == "document":
        return _document_tokens(block.get("source"), count_text, count_json, count_part)
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            inner = sum(count_part(p) for p in content)
        elif isinstance(content, str):
            inner = count_text(content)
        else:
            inner = count_json(content)
        return BLOCK_COSTS[kind] + inner
    return BLOCK_COSTS[kind] + count_text(str(block.get("name"))) + count_json(block.get("input"))


def _document_tokens(
    source: Any,
    count_text: Callable[[str], int],
    count_json: Callable[[Any], int],
    count_part: Callable[[Any], int],
) -> int:
    if not isinstance(source, dict):
        return count_json(source)
    data = source.get("data")
    if source.get("type") == "text" and isinstance(data, str):
        return count_text(data)
    if source.get("type") == "content":
        content = source.get("content")
        parts = content if isinstance(content, list) else [content]
        return sum(count_part(p) for p in parts)
    if source.get("type") == "base64" and isinstance(data, str):
        return DOCUMENT_PAGE_TOKENS * pdf_pages(data)
    return DOCUMENT_PAGE_TOKENS
