"""The summarizer's call in Chat Completions: the request it sends and what it reads back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from proxy.engine.steps.summarize.summarizer import SCHEMA_NAME, SummaryShape
from proxy.formats.openai_chat.fields import content_text

StructuredForm = Literal["json_schema", "json_object"]
STRUCTURED_FORMS: tuple[StructuredForm, ...] = ("json_schema", "json_object")
"""The ways to ask for an answer in a schema, the most widely understood first: OpenAI's
`json_schema` (OpenAI, vLLM, llama.cpp's `llama-server`), then `json_object` with a `schema`
(llama-cpp-python's server, which knows no other, and some hosted servers)."""


def summary_request(
    model: str,
    instructions: str,
    prompt: str,
    max_tokens: int,
    schema: Mapping[str, Any] | None = None,
    schema_name: str = "summary",
    form: StructuredForm = "json_schema",
) -> dict[str, Any]:
    """One non-streamed, deterministic call: the instructions as the system message; with a
    `schema` (a JSON schema as pydantic writes it), the answer asked for in it as structured
    output, in `form` (`response_format`, with `strict_schema(schema)`: the upstream enforces
    it while decoding)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [
            {"role": "system", "content": instructions},
            {"role": "user", "content": prompt},
        ],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": False,
    }
    if schema is not None:
        strict = strict_schema(schema)
        body["response_format"] = (
            {"type": form, "json_schema": {"name": schema_name, "strict": True, "schema": strict}}
            if form == "json_schema"
            else {"type": form, "schema": strict}
        )
    return body


_NOT_STRICT = frozenset({"title", "default", "maxLength"})
"""Keywords left out: strict mode refuses `default` (and, depending on the model, `maxLength`);
titles say nothing. Whoever reads the answer checks it against the full schema anyway."""


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` as OpenAI's strict structured output takes it: its definitions inlined (no
    `$ref`), every object closed (`additionalProperties: false`) with every property required
    (a list the model has nothing for is written empty), `_NOT_STRICT` keywords left out."""
    definitions = schema.get("$defs", {})
    top = {key: value for key, value in schema.items() if key != "$defs"}
    strict: dict[str, Any] = _strict(top, definitions)
    return strict


def _strict(node: Any, definitions: Mapping[str, Any]) -> Any:
    if isinstance(node, list):
        return [_strict(item, definitions) for item in node]
    if not isinstance(node, Mapping):
        return node
    if "$ref" in node:
        return _strict(definitions[node["$ref"].rsplit("/", 1)[-1]], definitions)
    out = {
        key: {name: _strict(sub, definitions) for name, sub in value.items()}
        if key == "properties"  # property names are kept whatever they are
        else _strict(value, definitions)
        for key, value in node.items()
        if key not in _NOT_STRICT
    }
    if out.get("type") == "object":
        out["additionalProperties"] = False
        out["required"] = list(out.get("properties", {}))
    return out


def summary_bodies(model: str, instructions: str, prompt: str, limit: int) -> list[dict[str, Any]]:
    """A summarizer call's bodies to try in order: each structured form, then none."""
    asked = (model, instructions, prompt, limit)
    schema = SummaryShape.model_json_schema()
    structured = [
        summary_request(*asked, schema=schema, schema_name=SCHEMA_NAME, form=form)
        for form in STRUCTURED_FORMS
    ]
    return [*structured, summary_request(*asked)]


def summary_answer(data: Any) -> tuple[str, str, dict[str, int]] | None:
    """(the first choice's text, the answering model, integer usage counts), or None when the
    answer has no text."""
    if not isinstance(data, dict):
        return None
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    text = content_text(message) if isinstance(message, dict) else None
    if not text:
        return None
    model = data.get("model")
    usage = data.get("usage")
    counts = (
        {k: v for k, v in usage.items() if isinstance(k, str) and type(v) is int}
        if isinstance(usage, dict)
        else {}
    )
    return text, model if isinstance(model, str) else "", counts
