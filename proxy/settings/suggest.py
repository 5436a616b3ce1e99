"""'Did you mean' for an unknown key of our own config: the closest known key at its place."""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel


def unknown_key(model: type[BaseModel], loc: Sequence[int | str]) -> str:
    """The message for the unknown key at `loc` (a validation error's location) in `model`:
    `unknown key`, with the closest field name of its model when one is close."""
    close = difflib.get_close_matches(str(loc[-1]), known_keys(model, loc[:-1]), n=1)
    return f"unknown key (did you mean {close[0]!r}?)" if close else "unknown key"


def known_keys(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The field names of the model found at `loc` under `model` (through fields, list items and
    optional values); [] where no single model is found."""
    current: Any = model
    for item in loc:
        if isinstance(item, int):
            current = _item_type(current)
            continue
        found = _model_of(current)
        info = found.model_fields.get(item) if found is not None else None
        if info is None:
            return []
        current = info.annotation
    found = _model_of(current)
    return list(found.model_fields) if found is not None else []


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    members = [_model_of(a) for a in _union_members(annotation)]
    models = [m for m in members if m is not None]
    return models[0] if len(models) == 1 else None


def _item_type(annotation: Any) -> Any:
    """The item type of a list annotation (`list[X]`, `X | None` around it)."""
    for member in (annotation, *_union_members(annotation)):
        if typing.get_origin(member) in (list, tuple, Sequence) and typing.get_args(member):
            return typing.get_args(member)[0]
    return None


def _union_members(annotation: Any) -> tuple[Any, ...]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(annotation)
    return ()
