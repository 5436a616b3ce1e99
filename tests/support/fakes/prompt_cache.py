"""A provider's prompt cache, simulated: what a request reads from it and writes to it.

Pure (no I/O, the clock injected), so tests and benchmarks can also feed it bodies directly.

Tokens: a prompt is the sequence of blocks its provider renders, in order (tools, system or
instructions, then each message or item; for Anthropic each content block), each block the
compact JSON of its object as sent (key order kept), and **one token is 4 bytes of that JSON**
(a block's last partial token counts whole). Deterministic, close enough to a BPE on JSON, and
the prefixes compare byte for byte.

- `OpenAICache` (automatic prefix caching): the longest prefix (in bytes, whole tokens) shared
  with a prompt of the same key seen within the TTL counts as cached, from 1,024 tokens on, in
  steps of 128 tokens; every prompt of 1,024 tokens or more is kept (the latest `keep` per key).
- `AnthropicCache` (explicit breakpoints): only prefixes ending at a block with `cache_control`
  (at most 4 per request, more is an error) are written; a request reads the longest prefix that
  was written before and is still live, found at one of its breakpoints or at one of the 20 block
  boundaries before each; `cache_read` is that prefix, `cache_write` the rest up to the last
  breakpoint, `input` the whole prompt. Prefixes under `min_tokens` (1,024) are never cached. An
  entry lives `ttl_s` (300 s; 3,600 s for `"ttl": "1h"`) from its last write or read.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TOKEN_BYTES = 4
DEFAULT_TTL_S = 300.0
LONG_TTL_S = 3600.0
OPENAI_MIN_TOKENS = 1024
OPENAI_STEP = 128
ANTHROPIC_MIN_TOKENS = 1024
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20

Clock = Callable[[], float]


def tokens_of(data: bytes) -> int:
    """The tokens of a block: 4 bytes each, the last partial one whole."""
    return -(-len(data) // TOKEN_BYTES)


def block_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class CacheUsage:
    """What one request billed: the whole prompt, and the parts read from and written to the
    cache (`input` includes both)."""

    input: int
    cache_read: int = 0
    cache_write: int = 0


@dataclass(frozen=True)
class Block:
    data: bytes
    ttl_s: float | None = None
    """Set when the block carries a `cache_control` breakpoint: how long its prefix lives."""


class TooManyBreakpoints(ValueError):
    """More than 4 `cache_control` blocks: Anthropic answers 400."""

    def __init__(self, found: int) -> None:
        super().__init__(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {found}."
        )


# -- the blocks of each wire format ---------------------------------------------------------


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def chat_blocks(body: Mapping[str, Any]) -> list[bytes]:
    """A chat completion: each tool, then each message."""
    return [block_bytes(t) for t in _listed(body.get("tools"))] + [
        block_bytes(m) for m in _listed(body.get("messages"))
    ]


def responses_blocks(body: Mapping[str, Any]) -> list[bytes]:
    """A Responses request: the instructions, each tool, then each input item."""
    blocks = [block_bytes(body["instructions"])] if body.get("instructions") else []
    blocks += [block_bytes(t) for t in _listed(body.get("tools"))]
    items = body.get("input")
    return blocks + ([block_bytes(items)] if isinstance(items, str) else [
        block_bytes(item) for item in _listed(items)
    ])  # fmt: skip


def _ttl(value: Any) -> float | None:
    mark = value.get("cache_control") if isinstance(value, dict) else None
    if not isinstance(mark, dict):
        return None
    return LONG_TTL_S if mark.get("ttl") == "1h" else DEFAULT_TTL_S


def _unmarked(value: Any) -> Any:
    """The block without its `cache_control` (a marker is no part of the cached content: a
    breakpoint that moves on keeps the prefix it marked)."""
    if isinstance(value, dict) and "cache_control" in value:
        return {k: v for k, v in value.items() if k != "cache_control"}
    return value


def _block(value: Any, *context: Any) -> Block:
    return Block(block_bytes([*context, _unmarked(value)]), _ttl(value))


def anthropic_blocks(body: Mapping[str, Any]) -> list[Block]:
    """A Messages request: each tool, each system block, then each message's content blocks
    (a string content is one block; each block carries its message's role and index)."""
    blocks = [_block(t) for t in _listed(body.get("tools"))]
    system = body.get("system")
    if isinstance(system, str) and system:
        blocks.append(_block(system))
    blocks += [_block(b) for b in _listed(system)]
    for index, message in enumerate(_listed(body.get("messages"))):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        parts = content if isinstance(content, list) else [content]
        blocks += [_block(part, index, role) for part in parts]
    return blocks


# -- the caches ------------------------------------------------------------------------------


def common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix (a binary search over slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class OpenAICache:
    def __init__(
        self,
        clock: Clock = time.monotonic,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        min_tokens: int = OPENAI_MIN_TOKENS,
        step: int = OPENAI_STEP,
        keep: int = 16,
    ) -> None:
        self._clock = clock
        self._ttl_s = ttl_s
        self._min_tokens = min_tokens
        self._step = step
        self._keep = keep
        self._prompts: dict[str, deque[tuple[bytes, float]]] = {}

    def request(self, key: str, blocks: Sequence[bytes]) -> CacheUsage:
        now = self._clock()
        prompt = b"".join(blocks)
        total = sum(tokens_of(block) for block in blocks)
        kept = deque(
            (p, seen) for p, seen in self._prompts.get(key, ()) if now - seen <= self._ttl_s
        )
        shared = max((common_prefix(prompt, p) for p, _ in kept), default=0) // TOKEN_BYTES
        cached = 0
        if shared >= self._min_tokens:
            cached = min(total, shared - (shared - self._min_tokens) % self._step)
        if total >= self._min_tokens:
            kept = deque((p, seen) for p, seen in kept if p != prompt)
            kept.append((prompt, now))
            while len(kept) > self._keep:
                kept.popleft()
        self._prompts[key] = kept
        return CacheUsage(total, cached, 0)


class AnthropicCache:
    def __init__(
        self,
        clock: Clock = time.monotonic,
        *,
        min_tokens: int = ANTHROPIC_MIN_TOKENS,
        lookback: int = LOOKBACK_BLOCKS,
    ) -> None:
        self._clock = clock
        self._min_tokens = min_tokens
        self._lookback = lookback
        self._entries: dict[tuple[str, bytes], tuple[float, float]] = {}
        """(key, prefix digest) -> (expiry, ttl)."""

    def request(self, key: str, blocks: Sequence[Block]) -> CacheUsage:
        marks = [i for i, block in enumerate(blocks) if block.ttl_s is not None]
        if len(marks) > MAX_BREAKPOINTS:
            raise TooManyBreakpoints(len(marks))
        now = self._clock()
        self._entries = {k: v for k, v in self._entries.items() if v[0] > now}
        digests, through = _prefixes(blocks)
        hit = self._longest_hit(key, marks, digests)
        read = through[hit] if hit >= 0 else 0
        if hit >= 0:
            ttl = self._entries[(key, digests[hit])][1]
            self._entries[(key, digests[hit])] = (now + ttl, ttl)
        write = 0
        for mark in marks:
            if through[mark] < self._min_tokens:
                continue
            ttl = blocks[mark].ttl_s or DEFAULT_TTL_S
            self._entries[(key, digests[mark])] = (now + ttl, ttl)
            if mark > hit:
                write = through[mark] - read
        return CacheUsage(through[-1] if through else 0, read, write)

    def _longest_hit(self, key: str, marks: Sequence[int], digests: Sequence[bytes]) -> int:
        """The last block of the longest live prefix found at a breakpoint or at one of the
        block boundaries just before it; -1 when none."""
        best = -1
        for mark in marks:
            for index in range(mark, max(best, mark - self._lookback - 1), -1):
                if (key, digests[index]) in self._entries:
                    best = index
                    break
        return best


def _prefixes(blocks: Sequence[Block]) -> tuple[list[bytes], list[int]]:
    """Per block: the digest of the prompt up to and including it, and its tokens so far."""
    digests: list[bytes] = []
    through: list[int] = []
    digest, tokens = b"", 0
    for block in blocks:
        digest = hashlib.sha256(digest + len(block.data).to_bytes(8, "big") + block.data).digest()
        tokens += tokens_of(block.data)
        digests.append(digest)
        through.append(tokens)
    return digests, through
