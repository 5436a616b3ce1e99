"""The token-count cache: bounded LRU storage, and the keys of messages with long texts
(other keys are exercised through `Counter` in test_counters.py)."""

from __future__ import annotations

import hashlib

import pytest

from proxy.jsonio import long_strings
from proxy.jsonio.slices import LONG_CHARS
from proxy.tokens import cache
from proxy.tokens.cache import LruCache, cache_digest, long_digest, message_key


def test_cache_is_bounded_and_keeps_recent_entries() -> None:
    cache = LruCache(3)
    for key in "abc":
        cache.put(key, 1)
    assert cache.get("a") == 1  # a becomes most recent
    cache.put("d", 1)
    assert len(cache) == 3
    assert cache.get("b") is None
    assert cache.get("a") == 1


def test_a_long_text_is_keyed_by_its_digest_never_by_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "é中😀 \ud800" * LONG_CHARS
    assert long_digest(text) == hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]
    hashed: list[str] = []
    monkeypatch.setattr(cache, "hash", lambda value: hashed.append(value) or 0, raising=False)
    first = message_key({"role": "tool", "content": text, "name": None})
    same = message_key({"content": "".join([text[:10], text[10:]]), "role": "tool", "name": None})
    other = message_key({"role": "tool", "content": text[:-1] + "y", "name": None})
    assert first == same != other
    assert hashed == ["tool", "tool", "tool"]  # the short field only


def test_a_long_message_s_digest_is_the_same_written_in_slices() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "é" * (3 * LONG_CHARS)}]}
    plain = cache_digest(message)
    with long_strings():
        assert cache_digest(message) == plain is not None
