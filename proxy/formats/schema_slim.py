"""Lossless slimming of a tool's JSON schema (`defer_tools.slim_schemas`): only transforms that
keep the schema equivalent for validation.

- a `title` that repeats its property's name (`channel_id` -> "Channel Id") or the tool's is
  removed, and so is an empty `description` (annotations: no validator reads them);
- a definition (`$defs` / `definitions`) referenced once, by a `$ref` with nothing beside it but
  annotations, is inlined there and removed (a recursive one never is).

Whitespace goes with the compact encoding every prepared body has. The order of keys is kept: it
is the order in which a model reads (and, in strict mode, writes) the parameters.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_DEFS = ("$defs", "definitions")
_ANNOTATIONS = frozenset({"$ref", "description", "title"})
_MAX_DEPTH = 64
_WORD = re.compile(r"[^a-z0-9]")


def slim_schema(schema: Any, tool_name: str = "") -> Any:
    """`schema` slimmed (a new object; the same object when nothing changes)."""
    if not isinstance(schema, dict):
        return schema
    slimmed = _inline_once(schema)
    slimmed = _without_repeats(slimmed, _plain(tool_name), 0)
    return schema if slimmed == schema else slimmed


def _plain(text: str) -> str:
    return _WORD.sub("", text.lower())


def _without_repeats(node: Any, name: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return node
    if isinstance(node, list):
        return [_without_repeats(item, "", depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str) and name and _plain(value) == name:
            continue
        if key == "description" and value == "":
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {
                prop: _without_repeats(sub, _plain(prop), depth + 1) for prop, sub in value.items()
            }
        elif key in _DEFS and isinstance(value, dict):
            out[key] = {d: _without_repeats(sub, _plain(d), depth + 1) for d, sub in value.items()}
        else:
            out[key] = _without_repeats(value, "", depth + 1)
    return out


def _inline_once(schema: dict[str, Any]) -> dict[str, Any]:
    refs = Counter(_refs(schema, 0))
    inlinable = {}
    for key in _DEFS:
        defs = schema.get(key)
        if not isinstance(defs, dict):
            continue
        for name, definition in defs.items():
            ref = f"#/{key}/{name}"
            if refs[ref] == 1 and ref not in set(_refs(definition, 0)):
                inlinable[ref] = definition
    if not inlinable:
        return schema
    done: set[str] = set()
    out: dict[str, Any] = _replaced(schema, inlinable, done, 0)
    for key in _DEFS:
        defs = out.get(key)
        if isinstance(defs, dict):
            kept = {n: d for n, d in defs.items() if f"#/{key}/{n}" not in done}
            if kept:
                out[key] = kept
            else:
                del out[key]
    return out


def _refs(node: Any, depth: int) -> list[str]:
    if depth > _MAX_DEPTH:
        return ["#too-deep"]
    if isinstance(node, list):
        return [r for item in node for r in _refs(item, depth + 1)]
    if not isinstance(node, dict):
        return []
    own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
    nested = [r for key, value in node.items() if key != "$ref" for r in _refs(value, depth + 1)]
    return own + nested


def _replaced(node: Any, inlinable: dict[str, Any], done: set[str], depth: int) -> Any:
    """`node` with each inlinable `$ref` (nothing but annotations beside it that its definition
    lacks) replaced by its definition; `done` collects the references replaced."""
    if depth > _MAX_DEPTH:
        return node
    if isinstance(node, list):
        return [_replaced(item, inlinable, done, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    definition = inlinable.get(ref) if isinstance(ref, str) else None
    if isinstance(ref, str) and isinstance(definition, dict) and set(node) <= _ANNOTATIONS:
        extra = {k: v for k, v in node.items() if k != "$ref"}
        if not set(extra) & set(definition):
            done.add(ref)
            return _replaced({**definition, **extra}, inlinable, done, depth + 1)
    return {key: _replaced(value, inlinable, done, depth + 1) for key, value in node.items()}
