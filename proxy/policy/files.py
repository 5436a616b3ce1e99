"""Policy file primitives: strict YAML reading, deep merging, and validation errors as
`key.path: problem` lines. `proxy.policy.store` builds the policy set from these.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from proxy.engine.policy import Policy

try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

NOT_IN_FILES = ("name",)
"""Keys a policy file may not set (the name is the file's stem)."""


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge recursively (override wins); anything else, lists included, is replaced."""
    merged = dict(base)
    for key, value in override.items():
        old = merged.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            merged[key] = deep_merge(old, value)
        else:
            merged[key] = value
    return merged


def merge_policy_data(parent: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """`extends` semantics: deep merge, except that the child's `models` globs are tried first."""
    merged = deep_merge(parent, child)
    parent_models, child_models = parent.get("models"), child.get("models")
    if isinstance(parent_models, Mapping) and isinstance(child_models, Mapping):
        models: dict[str, Any] = {}
        for glob, value in child_models.items():
            old = parent_models.get(glob)
            both = isinstance(old, Mapping) and isinstance(value, Mapping)
            models[glob] = deep_merge(old, value) if both else value  # type: ignore[arg-type]
        models.update((g, v) for g, v in parent_models.items() if g not in models)
        merged["models"] = models
    return merged


_BOOL_TAG = "tag:yaml.org,2002:bool"
_YAML12_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")


def _yaml12_resolvers() -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    """PyYAML's implicit resolvers with YAML 1.2 booleans: only true/false are booleans, so
    `mode: off` means the string "off" (YAML 1.1 would read it as false)."""
    resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}
    for first, entries in _SafeLoader.yaml_implicit_resolvers.items():
        kept = [(tag, rx) for tag, rx in entries if tag != _BOOL_TAG]
        if isinstance(first, str) and first in "tTfF":
            kept.append((_BOOL_TAG, _YAML12_BOOL))
        if kept:
            resolvers[first] = kept
    return resolvers


class _Loader(_SafeLoader):
    """PyYAML's safe loader (C when available) with YAML 1.2 booleans, refusing duplicate keys
    instead of silently keeping the last one."""

    yaml_implicit_resolvers = _yaml12_resolvers()

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_policy_file(path: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """The file's top-level mapping, or None and its `file: ...` problem lines."""
    label = path.name
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=_Loader)
    except OSError as exc:
        return None, [f"{label}: cannot read ({exc.strerror or exc})"]
    except UnicodeDecodeError as exc:
        return None, [f"{label}: not UTF-8 text ({exc.reason})"]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        return None, [f"{label}: {where}: {problem or 'invalid YAML'}"]
    except yaml.YAMLError as exc:  # e.g. a control character: one line, like every problem
        return None, [f"{label}: YAML: {' '.join(str(exc).split())}"]
    if data is None:  # an empty file is a policy with every default
        data = {}
    if not isinstance(data, dict):
        kind = type(data).__name__
        return None, [f"{label}: top level must be a mapping of policy keys, not a {kind}"]
    problems = [
        f"{label}: {key}: not allowed in a policy file (the policy is named after the file)"
        for key in NOT_IN_FILES
        if key in data
    ]
    parent = data.get("extends")
    if parent is not None and not isinstance(parent, str):
        problems.append(f"{label}: extends: must be the name of a policy (a string)")
    return (None, problems) if problems else (data, [])


def key_text(key: Any) -> str:
    """A key as shown in a problem line: as written, or quoted if it holds a line break etc."""
    return key if isinstance(key, str) and key.isprintable() else repr(key)


def format_validation_error(
    error: ValidationError, data: Any, origins: Mapping[str, str] | None = None
) -> list[str]:
    """`key.path: problem` lines; `data` is the validated input (used to name paths well);
    `origins` renames a path to the key the file wrote (an old key carried into the steps)."""
    by_path: dict[str, list[str]] = {}
    for item in error.errors():
        loc = tuple(item["loc"])
        path = _loc_path(loc, data) or "(top level)"
        path = (origins or {}).get(path, path)
        message = _message(item, loc)
        messages = by_path.setdefault(path, [])
        if message not in messages:
            messages.append(message)
    return [f"{path}: {' or '.join(messages)}" for path, messages in by_path.items()]


def _loc_path(loc: Sequence[int | str], data: Any) -> str:
    """Render a pydantic location as `a.b[0].c`, dropping union-member tags pydantic inserts
    (they are not keys of the input)."""
    path = ""
    node: Any = data
    for item in loc:
        if isinstance(node, list) and isinstance(item, int):
            path += f"[{item}]"
            node = node[item] if 0 <= item < len(node) else None
        elif isinstance(node, Mapping):
            if item not in node and item == node.get("kind"):
                continue  # discriminated union tag, e.g. steps[0].<kind>.key
            path += f".{key_text(item)}"
            node = node.get(item)
        else:
            break  # a scalar: what follows names union members (e.g. `literal['auto']`)
    return path.lstrip(".")


def _message(item: Mapping[str, Any], loc: Sequence[int | str]) -> str:
    kind, ctx = item["type"], item.get("ctx") or {}
    if kind == "extra_forbidden":
        key = str(loc[-1])
        close = difflib.get_close_matches(key, _known_keys(loc[:-1]), n=1)
        return f"unknown key (did you mean {close[0]!r}?)" if close else "unknown key"
    if kind == "union_tag_invalid":
        return f"unknown step kind {ctx.get('tag')!r} (expected one of {ctx.get('expected_tags')})"
    if kind == "union_tag_not_found":
        return f"missing {ctx.get('discriminator', 'kind')}"
    message = str(item["msg"])
    return message.removeprefix("Value error, ")


def _known_keys(loc: Sequence[int | str]) -> list[str]:
    """Field names of the model at `loc` when it is reached through model fields only."""
    model: type[BaseModel] = Policy
    for item in loc:
        info = model.model_fields.get(str(item))
        annotation = info.annotation if info is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return [n for n in model.model_fields if not (model is Policy and n in NOT_IN_FILES)]
