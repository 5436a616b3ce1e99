"""formats/openai_chat/summary.py: the summarizer's request and what is read of its answer."""

from __future__ import annotations

import json

from proxy.engine.steps.summarize.summarizer import SummaryShape
from proxy.formats.openai_chat.summary import strict_schema, summary_answer, summary_request


def test_the_request_is_one_deterministic_non_streamed_call() -> None:
    assert summary_request("m", "do this", "the turns", 300) == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "do this"},
            {"role": "user", "content": "the turns"},
        ],
        "max_tokens": 300,
        "temperature": 0,
        "stream": False,
    }


def test_a_schema_asks_for_strict_structured_output() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "title": "A"}}}
    body = summary_request("m", "do this", "the turns", 300, schema=schema, schema_name="s1")
    assert body == {
        **summary_request("m", "do this", "the turns", 300),
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "s1", "strict": True, "schema": strict_schema(schema)},
        },
    }
    assert strict_schema(schema) == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": False,
        "required": ["a"],
    }
    assert schema["properties"]["a"]["title"] == "A"  # the schema given is left as it was
    other = summary_request("m", "do this", "the turns", 300, schema=schema, form="json_object")
    assert other["response_format"] == {"type": "json_object", "schema": strict_schema(schema)}


def test_the_strict_schema_inlines_definitions_and_closes_every_object() -> None:
    schema = {
        "$defs": {"Item": {"type": "object", "properties": {"title": {"type": "string"},
                                                            "n": {"type": "integer",
                                                                  "default": 3}}}},
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                       "note": {"type": "string", "maxLength": 9, "default": ""}},
        "required": ["items"],
    }
    assert strict_schema(schema) == {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "n": {"type": "integer"}},
                "additionalProperties": False,
                "required": ["title", "n"],  # a property named `title` is kept
            }},
            "note": {"type": "string"},
        },
        "additionalProperties": False,
        "required": ["items", "note"],
    }


def test_a_definition_in_a_list_or_in_another_definition_is_inlined_too() -> None:
    closed = {"additionalProperties": False}
    schema = {
        "$defs": {
            "Inner": {"type": "object", "properties": {"v": {"enum": ["a", "b"], "title": "V"}}},
            "Outer": {"type": "object", "properties": {"inner": {"$ref": "#/$defs/Inner"}}},
        },
        "type": "object",
        "properties": {"o": {"anyOf": [{"$ref": "#/$defs/Outer"}, {"type": "null"}]}},
    }
    inner = {"type": "object", "properties": {"v": {"enum": ["a", "b"]}}, **closed,
             "required": ["v"]}
    outer = {"type": "object", "properties": {"inner": inner}, **closed, "required": ["inner"]}
    assert strict_schema(schema) == {
        "type": "object",
        "properties": {"o": {"anyOf": [outer, {"type": "null"}]}},
        **closed,
        "required": ["o"],
    }


def test_an_object_without_properties_is_closed_and_requires_nothing() -> None:
    assert strict_schema({"type": "object"}) == {
        "type": "object",
        "additionalProperties": False,
        "required": [],
    }


def test_the_summarys_strict_schema_is_its_shape() -> None:
    schema = strict_schema(SummaryShape.model_json_schema())
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == list(SummaryShape.model_fields) == list(schema["properties"])
    assert schema["properties"]["facts"]["items"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
        "required": ["name", "value"],
        "additionalProperties": False,
    }
    for key in ("decisions", "open_questions", "resources", "errors"):
        assert schema["properties"][key] == {"type": "array", "items": {"type": "string"}}
    text = json.dumps(schema)
    for word in ("$ref", "$defs", "default", "title", "description"):
        assert word not in text


def test_the_answer_is_the_first_choices_text_its_model_and_integer_usage() -> None:
    parts = {"role": "assistant", "content": [{"type": "text", "text": "a"},
                                              {"type": "text", "text": "b"}]}
    data = {"model": "m1", "choices": [{"message": parts}, {"message": {"content": "x"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "odd": 1.5, "flag": True}}
    assert summary_answer(data) == ("ab", "m1", {"prompt_tokens": 5, "completion_tokens": 2})
    assert summary_answer({"choices": [{"message": {"content": "t"}}]}) == ("t", "", {})
    for bad in (None, [], {"choices": []}, {"choices": [{"message": {"content": ""}}]},
                {"choices": [{"message": {"content": None}}]}, {"choices": ["x"]}):
        assert summary_answer(bad) is None
