"""JSON in and out: orjson for speed, the stdlib as a lossless fallback for what orjson refuses."""

from __future__ import annotations

import json
from typing import Any

import orjson

from proxy.errors import ErrorCode, ProxyError


def loads(raw: bytes | str) -> Any:
    """Parse JSON; integers beyond 64 bits (which orjson rejects) fall back to the stdlib."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise ProxyError(
                ErrorCode.invalid_json, f"Request body is not valid JSON: {exc}"
            ) from exc
    except RecursionError as exc:
        raise ProxyError(ErrorCode.invalid_json, "Request body is nested too deeply") from exc


def dumps(value: Any) -> bytes:
    """Serialise, keeping key order; falls back to the stdlib for integers orjson cannot hold."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def loads_object(raw: bytes) -> dict[str, Any]:
    """Parse a request body that must be a JSON object."""
    value = loads(raw)
    if not isinstance(value, dict):
        raise ProxyError(ErrorCode.invalid_request, "Request body must be a JSON object")
    return value
