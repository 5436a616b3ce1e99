"""`proxy.synthetic`: the synthetic tools' names, renaming and format-neutral specs."""

from __future__ import annotations

import json

from proxy.synthetic.names import ToolNames, names_avoiding
from proxy.synthetic.read import HARD_MAX_PAGE_CHARS, READ_TOOL, page_cap
from proxy.synthetic.registry import is_synthetic, tool_specs
from proxy.synthetic.search import SEARCH_TOOL


def test_tool_specs_shape_and_caps() -> None:
    """Format-neutral specs; each format wraps them (tests/formats/test_openai_chat_request.py)."""
    specs = tool_specs(5000)
    assert [s.name for s in specs] == [READ_TOOL, SEARCH_TOOL]
    for spec in specs:
        assert "untrusted" in spec.description.lower()
        assert spec.parameters["type"] == "object"
        assert "artifact_id" in spec.parameters["required"]
    read_props = specs[0].parameters["properties"]
    assert read_props["max_chars"]["maximum"] == 5000
    assert read_props["offset"]["minimum"] == 0
    huge = tool_specs(10**6)[0].parameters["properties"]["max_chars"]["maximum"]
    assert huge == HARD_MAX_PAGE_CHARS
    assert specs[1].parameters["required"] == ["artifact_id", "pattern"]
    json.dumps([spec.parameters for spec in specs])  # plain JSON
    assert tool_specs(5000)[0].parameters is not specs[0].parameters  # fresh on every call


def test_is_synthetic() -> None:
    assert is_synthetic(READ_TOOL) and is_synthetic(SEARCH_TOOL)
    assert not is_synthetic("read_file") and not is_synthetic("")


def test_page_cap_stays_between_one_and_the_hard_cap() -> None:
    assert page_cap(0) == 1
    assert page_cap(5000) == 5000
    assert page_cap(10**9) == HARD_MAX_PAGE_CHARS


def test_names_avoid_the_clients_tools_and_map_back() -> None:
    assert names_avoiding({"run_shell"}) == ToolNames()
    assert not ToolNames().renamed
    names = names_avoiding({READ_TOOL, f"{READ_TOOL}_ctxproxy"})
    read = names.own(READ_TOOL)
    assert read == f"{READ_TOOL}_ctxproxy2" and names.own(SEARCH_TOOL) == SEARCH_TOOL
    assert names.renamed
    assert names.canonical(read) == READ_TOOL
    assert names.canonical(READ_TOOL) == READ_TOOL  # the client's own tool keeps its name
    assert read in names and READ_TOOL not in names and SEARCH_TOOL in names
    assert names.canonical_names == (READ_TOOL, SEARCH_TOOL)


def test_only_the_offered_tools_are_named() -> None:
    names = names_avoiding({"run_shell"}, offered=(SEARCH_TOOL,))
    assert SEARCH_TOOL in names and READ_TOOL not in names
    assert names.own(READ_TOOL) == READ_TOOL and names.canonical_names == (SEARCH_TOOL,)
