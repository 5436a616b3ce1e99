"""What several formats share: lenient reads of wire values, summed usage, the refusal of broken
input. A format module imports these from here, never from another format."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from proxy.engine.conversation import Problem
from proxy.engine.wire import CacheMarks, CacheMarksMode
from proxy.errors import ErrorCode, ProxyError
from proxy.tokens.usage import TokenUsage


def int_value(value: object) -> int | None:
    """`value` when it is an integer (a JSON `true` is not one), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def str_field(obj: object, key: str) -> str | None:
    """`obj[key]` when `obj` is an object and the value a string, else None."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def add_usage(total: dict[str, Any] | None, more: Any) -> dict[str, Any] | None:
    """`total` + `more`: integers summed (nested details too); other values from the latest."""
    if not isinstance(more, dict):
        return total
    if total is None:
        return _copy_usage(more)
    out = dict(total)
    for key, value in more.items():
        mine = out.get(key)
        if int_value(value) is not None and (mine is None or int_value(mine) is not None):
            out[key] = (mine or 0) + value
        elif isinstance(value, dict) and (mine is None or isinstance(mine, dict)):
            out[key] = add_usage(mine, value)
        elif value is not None or key not in out:
            out[key] = value
    return out


def _copy_usage(usage: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy_usage(v) if isinstance(v, dict) else v for k, v in usage.items()}


def usage_keys(*keys: str) -> re.Pattern[bytes]:
    """A scan for `"<key>": <digits>` of these keys in stream bytes. A key inside a string of
    the stream (a model's text, a tool's arguments) has its quotes escaped and never matches."""
    names = b"|".join(re.escape(key.encode()) for key in keys)
    return re.compile(rb'"(' + names + rb')"\s*:\s*(\d{1,12})(?![0-9])')


class KeyScanner:
    """One streamed answer's usage, from the last value of each usage key its bytes state (a
    scan, nothing parsed: `AnswerFormat.usage_scanner`); `build` makes the format's
    `TokenUsage` of those values (by key)."""

    def __init__(
        self, pattern: re.Pattern[bytes], build: Callable[[Mapping[str, int]], TokenUsage | None]
    ) -> None:
        self._pattern = pattern
        self._build = build
        self._values: dict[str, int] = {}

    def feed(self, data: bytes) -> bool:
        """Scan these bytes; True when they stated a value."""
        found = False
        for match in self._pattern.finditer(data):
            self._values[match.group(1).decode()] = int(match.group(2))
            found = True
        return found

    def usage(self) -> TokenUsage | None:
        return self._build(self._values) if self._values else None


def invalid_error(problems: Sequence[Problem], id_key: str = "tool_call_id") -> ProxyError:
    """The refusal of structurally broken input (`on_invalid: reject`): the first problem's
    reason and `param`, every problem in the details (`id_key`: the format's name for a call
    id)."""
    first = problems[0]
    listed = [{"index": p.index, id_key: p.tool_call_id, "reason": p.reason} for p in problems]
    return ProxyError(
        ErrorCode.invalid_messages, first.reason, param=first.param, details={"problems": listed}
    )


def no_cache_marks(
    body: dict[str, Any], mode: CacheMarksMode, stable_items: int
) -> CacheMarks | None:
    """A format without prompt-cache breakpoints (OpenAI's cache finds prefixes by itself)."""
    return None
EXTENDED_RETENTION_SECONDS = 24 * 3600
"""OpenAI's `prompt_cache_retention: "24h"` (Chat Completions and Responses)."""


def retention_ttl(body: dict[str, Any]) -> int | None:
    """The prompt-cache lifetime an OpenAI request asks for: 24 hours with
    `prompt_cache_retention: "24h"` (extended retention); None otherwise (`in_memory` or none:
    the upstream's configured lifetime applies)."""
    return EXTENDED_RETENTION_SECONDS if body.get("prompt_cache_retention") == "24h" else None
