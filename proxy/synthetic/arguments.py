"""A synthetic call's arguments, read leniently (a model writes `200.0` for 200) but checked:
anything else is an `ArgumentError` whose message the model reads."""

from __future__ import annotations

import json
from typing import Any

import orjson

from proxy.synthetic.base import ArgumentError


def parse_arguments(arguments: str | dict[str, Any]) -> dict[str, Any]:
    """The arguments as an object: a JSON text (empty: no arguments) or an object already."""
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            parsed: Any = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            try:
                parsed = json.loads(arguments)
            except (ValueError, RecursionError):
                raise ArgumentError("arguments are not valid JSON") from None
    else:
        parsed = arguments
    if not isinstance(parsed, dict):
        raise ArgumentError("arguments must be a JSON object")
    return parsed


def str_arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if value is None:
        raise ArgumentError(f"`{key}` is required")
    if not isinstance(value, str):
        raise ArgumentError(f"`{key}` must be a string")
    return value


def int_arg(args: dict[str, Any], key: str, default: int, *, minimum: int) -> int:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # some models write 200.0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentError(f"`{key}` must be an integer")
    if value < minimum:
        raise ArgumentError(f"`{key}` must be >= {minimum}")
    return value
