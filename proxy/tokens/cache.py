"""Keys and storage of the per-message token-count cache.

A key must identify a message's content without re-reading it more than once: most messages are
keyed by their fields' randomized string hashes (`_flat_key`), the rest by a sha256 of their JSON.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from proxy.jsonio import dumps_sorted
from proxy.jsonio.slices import LONG_CHARS, utf8_slices

# Python's str hash is SipHash under a random per-process key unless PYTHONHASHSEED fixes it:
# then, and only then, it is a safe cache key that costs no serialisation.
_RANDOMIZED_STR_HASH = bool(sys.flags.hash_randomization)


def _flat_key(message: Any) -> tuple[Any, ...] | None:
    """A cheap cache key for a message whose values are all strings or null (most messages):
    per field its name, length and randomized hash (a long text's `long_digest`), so no field's
    text is copied or serialised. None for anything else (tool calls, content parts)."""
    if not _RANDOMIZED_STR_HASH or type(message) is not dict:
        return None
    fields: list[tuple[Any, ...]] = []
    for name, value in message.items():
        if type(value) is str:
            size = len(value)
            fields.append((name, size, hash(value) if size < LONG_CHARS else long_digest(value)))
        elif value is None:
            fields.append((name,))
        else:
            return None
    return tuple(sorted(fields))  # field order does not change the count


def long_digest(text: str) -> bytes:
    """sha256 of a long text's UTF-8, encoded a slice at a time: `hash()` reads the whole text in
    one call that holds the GIL (~15 ms at 30 MB), sha256 releases it while it hashes."""
    digest = hashlib.sha256()
    for piece in utf8_slices(text):
        digest.update(piece)
    return digest.digest()[:16]


def cache_digest(value: Any) -> bytes | None:
    """sha256 of the value's sorted-key JSON (16 bytes); None when orjson cannot write it."""
    try:
        data = dumps_sorted(value)
    except TypeError:
        return None
    return hashlib.sha256(data).digest()[:16]  # sha256 runs ~2x blake2b here (SHA extensions)


class LruCache:
    """A bounded, thread-safe mapping that forgets the least recently used entry."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable) -> int | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: int) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)


def message_key(message: Any) -> Hashable | None:
    """The cache key of one message: `_flat_key` where it applies, else `cache_digest`."""
    flat = _flat_key(message)
    return cache_digest(message) if flat is None else flat
