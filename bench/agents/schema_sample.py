"""A small value that satisfies a JSON schema: what the fake answers structured-output requests."""

from __future__ import annotations

from typing import Any

from bench.agents.fake_common import SIDE_TEXT


def sample_for_schema(schema: Any, depth: int = 0) -> Any:
    """Required properties filled in (strings with the side text, numbers 0, booleans false)."""
    if not isinstance(schema, dict) or depth > 6:
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return sample_for_schema(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        required = schema.get("required") or list(properties)
        return {name: sample_for_schema(properties.get(name), depth + 1) for name in required}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return SIDE_TEXT
