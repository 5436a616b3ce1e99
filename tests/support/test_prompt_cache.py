"""`fakes.prompt_cache`: the simulated prompt caches count as their providers document."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.prompt_cache import (
    AnthropicCache,
    Block,
    CacheUsage,
    OpenAICache,
    TooManyBreakpoints,
    anthropic_blocks,
    chat_blocks,
    common_prefix,
    responses_blocks,
    tokens_of,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def blob(tokens: int, tag: str = "a") -> bytes:
    """A block of exactly `tokens` tokens."""
    return (tag * 4 * tokens).encode()


def test_tokens_are_four_bytes_rounded_up() -> None:
    assert [tokens_of(b"x" * n) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]
    assert common_prefix(b"abcdef", b"abcxyz") == 3
    assert common_prefix(b"", b"abc") == 0 and common_prefix(b"abc", b"abc") == 3


def test_openai_caches_from_1024_tokens_in_steps_of_128() -> None:
    cache = OpenAICache(Clock())
    small = [blob(1000)]
    assert cache.request("k", small) == CacheUsage(1000)
    assert cache.request("k", small) == CacheUsage(1000)  # under 1,024 tokens: never cached
    first = [blob(1500), blob(200, "b")]
    assert cache.request("k", first) == CacheUsage(1700)
    assert cache.request("k", first).cache_read == 1664  # 1,024 + 5 * 128 <= 1,700
    grown = [blob(1500), blob(200, "b"), blob(300, "c")]
    assert cache.request("k", grown).cache_read == 1664  # the shared 1,700, in steps
    changed = [blob(1100), blob(900, "z")]
    assert cache.request("k", changed).cache_read == 1024  # 1,100 shared
    assert cache.request("other", grown).cache_read == 0  # another key shares nothing


def test_openai_prompts_expire_after_the_ttl() -> None:
    clock = Clock()
    cache = OpenAICache(clock, ttl_s=300)
    prompt = [blob(2048)]
    cache.request("k", prompt)
    clock.now += 299
    assert cache.request("k", prompt).cache_read == 2048  # and seen again now
    clock.now += 301
    assert cache.request("k", prompt).cache_read == 0


def mark(tokens: int, tag: str = "a", ttl: float = 300.0) -> Block:
    return Block(blob(tokens, tag), ttl)


def test_anthropic_caches_only_up_to_breakpoints() -> None:
    cache = AnthropicCache(Clock())
    unmarked = [Block(blob(3000))]
    assert cache.request("k", unmarked) == CacheUsage(3000)
    assert cache.request("k", unmarked) == CacheUsage(3000)  # no breakpoint: no cache
    marked = [mark(2000), Block(blob(500, "b"))]
    assert cache.request("k", marked) == CacheUsage(2500, 0, 2000)  # written
    assert cache.request("k", marked) == CacheUsage(2500, 2000, 0)  # read
    assert cache.request("k2", marked) == CacheUsage(2500, 0, 2000)


def test_a_moving_breakpoint_reads_the_previous_one_within_20_blocks() -> None:
    cache = AnthropicCache(Clock())
    head = [Block(blob(1500)), Block(blob(10, "b"))]
    turn1 = [*head, mark(10, "c")]
    assert cache.request("k", turn1) == CacheUsage(1520, 0, 1520)
    turn2 = [*head, Block(blob(10, "c")), Block(blob(10, "d")), mark(10, "e")]
    assert cache.request("k", turn2) == CacheUsage(1540, 1520, 20)
    far = [*head, Block(blob(10, "c"))] + [Block(blob(1, str(i))) for i in range(20)]
    far.append(mark(1, "z"))  # the previous breakpoint is 21 blocks back: not found
    assert cache.request("k", far).cache_read == 0


def test_prefixes_under_the_minimum_are_never_cached() -> None:
    cache = AnthropicCache(Clock(), min_tokens=1024)
    short = [mark(1000)]
    assert cache.request("k", short) == CacheUsage(1000)
    assert cache.request("k", short) == CacheUsage(1000)
    two = [mark(1000), mark(100, "b")]  # the first is too short, the second long enough
    assert cache.request("k", two) == CacheUsage(1100, 0, 1100)
    assert cache.request("k", two) == CacheUsage(1100, 1100, 0)


def test_at_most_four_breakpoints() -> None:
    cache = AnthropicCache(Clock())
    with pytest.raises(TooManyBreakpoints, match="Found 5"):
        cache.request("k", [mark(1, str(i)) for i in range(5)])


def test_anthropic_entries_live_five_minutes_from_their_last_use_or_an_hour() -> None:
    clock = Clock()
    cache = AnthropicCache(clock)
    short, long = [mark(2000)], [mark(2000, "l", ttl=3600.0)]
    cache.request("k", short)
    cache.request("k", long)
    clock.now += 299
    assert cache.request("k", short).cache_read == 2000  # a read refreshes it
    clock.now += 299
    assert cache.request("k", short).cache_read == 2000
    clock.now += 301
    assert cache.request("k", short) == CacheUsage(2000, 0, 2000)  # expired: written again
    assert cache.request("k", long).cache_read == 2000  # 899 s: the hour holds


def test_the_blocks_of_each_format() -> None:
    tool = {"name": "t", "input_schema": {}}
    body: dict[str, Any] = {
        "tools": [tool],
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        ],
    }
    blocks = anthropic_blocks(body)
    assert len(blocks) == 4
    assert [b.ttl_s for b in blocks] == [None, 300.0, None, None]
    assert blocks[2].data == b'[0,"user","hi"]'
    assert anthropic_blocks({**body, "system": "plain"})[1].ttl_s is None
    chat = {"tools": [tool], "messages": [{"role": "user", "content": "hi"}]}
    assert chat_blocks(chat) == [
        b'{"name":"t","input_schema":{}}',
        b'{"role":"user","content":"hi"}',
    ]
    assert responses_blocks({"instructions": "i", "input": "hello"}) == [b'"i"', b'"hello"']
    assert len(responses_blocks({"input": [{"role": "user", "content": "x"}], "tools": []})) == 1


def test_a_moved_marker_keeps_the_prefix_it_marked() -> None:
    """`cache_control` is no part of the cached content: Claude Code moves its breakpoint to the
    newest message every turn and reads the previous turn's prefix."""
    cache = AnthropicCache(Clock())
    marked = {"type": "text", "text": "x" * 8000, "cache_control": {"type": "ephemeral"}}
    first = {"messages": [{"role": "user", "content": [marked]}]}
    plain = {"type": "text", "text": "x" * 8000}
    moved = {"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}
    second = {
        "messages": [
            {"role": "user", "content": [plain]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [moved]},
        ]
    }
    written = cache.request("k", anthropic_blocks(first)).cache_write
    usage = cache.request("k", anthropic_blocks(second))
    assert written > 1024 and usage.cache_read == written
