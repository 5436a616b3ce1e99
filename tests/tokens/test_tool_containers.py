"""Tool containers (Codex's `namespace` tools, MCP-style nested lists) are counted as their parts:
never less than the same tools listed flat, and no more than that plus the container's own
framing (its name and description lines)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from shared_tokens import shared_counters

from proxy.tokens.counters import TokenCounter

names = st.from_regex(r"[a-z][a-z0-9_]{0,24}", fullmatch=True)
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=400)
schemas = st.dictionaries(
    names,
    st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer", "boolean", "array"])},
        optional={"description": texts},
    ),
    max_size=5,
).map(lambda props: {"type": "object", "properties": props, "required": list(props)[:1]})
functions = st.builds(
    lambda name, description, parameters: {
        "type": "function", "name": name, "description": description, "parameters": parameters,
    },
    names, texts, schemas,
)  # fmt: skip
customs = st.builds(
    lambda name, description, grammar: {
        "type": "custom", "name": name, "description": description,
        "format": {"type": "grammar", "syntax": "lark", "definition": grammar},
    },
    names, texts, texts.filter(bool),
)  # fmt: skip
parts = st.lists(st.one_of(functions, customs), min_size=1, max_size=6)

COUNTERS = shared_counters()
METHODS = {
    "o200k": COUNTERS.for_model("gpt-5"),
    "cl100k": COUNTERS.for_model("gpt-4"),
    "claude": COUNTERS.for_model("claude-sonnet-4-5"),
    "estimate": COUNTERS.for_model("m", "estimate"),
}


def framing(counter: TokenCounter, name: str, description: str) -> int:
    """The container's own lines: its description, its namespace's opening and closing."""
    lines = ([f"// {description}"] if description else []) + [f"namespace {name} {{", ""]
    return counter.count_text("\n".join([*lines, f"}} // namespace {name}"])) + 2


@pytest.mark.parametrize("method", sorted(METHODS))
@settings(max_examples=examples(60), deadline=None)
@given(tools=parts, name=names, description=texts)
def test_a_container_counts_its_tools_plus_its_framing(
    method: str, tools: list[dict[str, Any]], name: str, description: str
) -> None:
    counter = METHODS[method]
    flat = counter.count_tools(tools, None)
    container = {"type": "namespace", "name": name, "description": description, "tools": tools}
    nested = counter.count_tools([container], None)
    assert nested >= flat
    assert nested - framing(counter, name, description) <= flat


def test_codex_like_namespace_counts_its_long_description() -> None:
    """The case found from outside: one tool with a long description counted 1,244 tokens flat
    and 40 inside a namespace."""
    counter = METHODS["o200k"]
    long = {
        "type": "function",
        "name": "spawn_agent",
        "description": "Spawn an agent. " * 300,
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
    }
    container = {"type": "namespace", "name": "multi_agent_v1", "tools": [long]}
    flat = counter.count_tools([long], None)
    assert flat > 1000
    assert flat <= counter.count_tools([container], None) <= flat + 20


def test_tools_inside_an_item_count_as_the_requests_tools() -> None:
    """Codex's `additional_tools` input item: its tools count as `tools` do, not as JSON."""
    counter = METHODS["o200k"]
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}}
    weather = {"type": "function", "name": "get_weather", "parameters": parameters}
    namespace = {"type": "namespace", "name": "functions", "tools": [weather]}
    item = {"type": "additional_tools", "role": "developer", "tools": [namespace]}
    framing = counter.count_message({"type": "additional_tools", "role": "developer"})
    assert counter.count_message(item) == framing + counter.count_tools([namespace], None)
