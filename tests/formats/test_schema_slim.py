"""proxy/formats/schema_slim.py: lossless slimming of tool schemas (validation unchanged)."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from proxy.formats.schema_slim import slim_schema

PYDANTIC_LIKE: dict[str, Any] = {
    "title": "Post Message",
    "type": "object",
    "properties": {
        "channel_id": {"title": "Channel Id", "type": "string", "description": ""},
        "options": {"$ref": "#/$defs/Options", "description": "How to post"},
        "when": {"title": "Post at", "type": "integer"},
    },
    "required": ["channel_id"],
    "$defs": {
        "Options": {
            "title": "Options",
            "type": "object",
            "properties": {"thread": {"$ref": "#/$defs/Thread"}},
        },
        "Thread": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+$"},
        "Shared": {"type": "integer", "minimum": 0},
        "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}},
    },
}
SHARED = {"$ref": "#/$defs/Shared"}
PYDANTIC_LIKE["properties"] |= {"count": SHARED, "limit": dict(SHARED)}


def test_repeated_titles_empty_descriptions_and_single_use_definitions_go() -> None:
    original = copy.deepcopy(PYDANTIC_LIKE)
    slim = slim_schema(PYDANTIC_LIKE, "post_message")
    assert original == PYDANTIC_LIKE  # never changed in place
    assert "title" not in slim  # repeats the tool's name
    channel = slim["properties"]["channel_id"]
    assert channel == {"type": "string"}
    assert slim["properties"]["when"]["title"] == "Post at"  # says more than the name: kept
    options = slim["properties"]["options"]
    assert options["description"] == "How to post"
    assert options["properties"]["thread"]["pattern"] == "^[0-9]+\\.[0-9]+$"  # nested, inlined
    assert set(slim["$defs"]) == {"Shared", "Node"}  # used twice; recursive


def test_a_ref_with_validation_beside_it_is_not_inlined() -> None:
    schema = {
        "properties": {"a": {"$ref": "#/definitions/A", "maxLength": 3}},
        "definitions": {"A": {"type": "string"}},
    }
    assert slim_schema(schema) is schema


def test_nothing_to_slim_is_the_same_object() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert slim_schema(schema, "search") is schema
    assert slim_schema("junk") == "junk"


KEYS = ["channel_id", "options", "thread", "when", "count", "limit"]
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@given(VALUES)
def test_validation_is_unchanged(instance: Any) -> None:
    validator = jsonschema.Draft202012Validator
    before = validator(PYDANTIC_LIKE).is_valid(instance)
    assert validator(slim_schema(PYDANTIC_LIKE, "post_message")).is_valid(instance) == before
    sample = {"channel_id": "C1", "options": {"thread": "1.2"}}
    assert validator(slim_schema(PYDANTIC_LIKE)).is_valid(sample)
    wrong = {**sample, "options": {"thread": "x"}}
    assert not validator(slim_schema(PYDANTIC_LIKE)).is_valid(wrong)
