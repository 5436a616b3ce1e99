"""Model metadata (context window, output limit) from litellm's bundled model map, read offline.

`lookup(model)` tries, in order, and takes the first entry with a usable window:
1. the name as given (`azure/eu/gpt-4o-2024-08-06`, `gpt-4o`), then lower-cased;
2. the name without its provider prefixes, one segment at a time (`openai/gpt-4o` -> `gpt-4o`);
3. each of those without a trailing date or version stamp (`gpt-4o-2099-01-01` -> `gpt-4o`,
   `claude-x-20991231` -> `claude-x`, `gpt-4-0613` -> `gpt-4`).
"""

from __future__ import annotations

import importlib.util
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson

MAP_FILE = "model_prices_and_context_window_backup.json"
DATE_SUFFIX = re.compile(r"(?:[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}))$")


@dataclass(frozen=True)
class ModelInfo:
    context_window: int
    max_output_tokens: int | None


def bundled_map_path() -> Path | None:
    """litellm's bundled model map, found without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / MAP_FILE


def _positive_int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _model_info(entry: Any) -> ModelInfo | None:
    if not isinstance(entry, dict):
        return None
    window = _positive_int(entry.get("max_input_tokens")) or _positive_int(entry.get("max_tokens"))
    if window is None:
        return None
    return ModelInfo(window, _positive_int(entry.get("max_output_tokens")))


def _candidates(model: str) -> Iterator[str]:
    names = [model, model.lower()]
    segments = model.lower().split("/")
    names += ["/".join(segments[start:]) for start in range(1, len(segments))]
    yield from names
    for name in names:
        undated = DATE_SUFFIX.sub("", name)
        if undated != name:
            yield undated


MEMO_ENTRIES = 1024
T = TypeVar("T")


class ModelCatalog:
    """Context windows by model name; the map is read on first lookup, once per instance."""

    def __init__(self, map_path: Path | None = None) -> None:
        self._map_path = map_path
        self._entries: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._found: dict[str, ModelInfo | None] = {}

    def lookup(self, model: str) -> ModelInfo | None:
        """The model's limits; answers for the most recent names are remembered (clients send
        the same few names, and any name a client sends must not grow memory without bound)."""
        if not isinstance(model, str) or not model:
            return None
        try:
            return self._found[model]
        except KeyError:
            pass
        info = self._search(model)
        if len(self._found) >= MEMO_ENTRIES:
            self._found.clear()
        self._found[model] = info
        return info

    def _search(self, model: str) -> ModelInfo | None:
        return self.find(model, _model_info)

    def find(self, model: str, usable: Callable[[Any], T | None]) -> T | None:
        """`usable(entry)` of the first candidate name (see the module) whose entry it accepts
        (not None): the prices read the same entries (`tokens.prices`). Not remembered here."""
        entries = self._load()
        for name in _candidates(model):
            found = usable(entries.get(name))
            if found is not None:
                return found
        return None

    def loaded(self) -> bool:
        """Whether the map is read already (reading it parses ~3 MB of JSON: ~20 ms of CPU,
        which the first request does in a worker thread, not on the event loop)."""
        return self._entries is not None

    def load(self) -> None:
        """Read the map now (idempotent)."""
        self._load()

    def _load(self) -> dict[str, Any]:
        if self._entries is None:
            with self._lock:
                if self._entries is None:
                    self._entries = self._read()
        return self._entries

    def _read(self) -> dict[str, Any]:
        path = self._map_path or bundled_map_path()
        if path is None:  # litellm not installed: every lookup falls back to the policy
            return {}
        data = orjson.loads(path.read_bytes())
        return data if isinstance(data, dict) else {}
