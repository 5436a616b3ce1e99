"""The token-count cache: bounded LRU storage (keys are exercised through `Counter` in
test_tokens.py)."""

from __future__ import annotations

from proxy.tokens.cache import LruCache


def test_cache_is_bounded_and_keeps_recent_entries() -> None:
    cache = LruCache(3)
    for key in "abc":
        cache.put(key, 1)
    assert cache.get("a") == 1  # a becomes most recent
    cache.put("d", 1)
    assert len(cache) == 3
    assert cache.get("b") is None
    assert cache.get("a") == 1
