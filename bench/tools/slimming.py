"""What `slim_schemas` saves (`python -m bench.tools.slimming`): the tool-definition tokens of
the 120 fixture tools as the fixture holds them (a TypeScript MCP server's shape: zod's
`$schema`, `additionalProperties`, no titles) and as a Python server built on pydantic publishes
them (a `title` on every property and on the schema, `Shared` definitions referenced once),
before and after slimming, counted as the proxy counts them (gpt-4o's o200k for the chat shape,
Claude's tokenizer for the Messages shape)."""

from __future__ import annotations

import copy
from typing import Any

from bench.tools.fixture import TOOLS_BY_FORMAT
from proxy.formats.tool_defs import slim_anthropic_tool, slim_chat_tool
from proxy.tokens.counters import TokenCounters

SHAPES = {
    "openai_chat": ("gpt-4o", slim_chat_tool),
    "anthropic_messages": ("claude-sonnet-4-5", slim_anthropic_tool),
}


def pydantic_shaped(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """`schema` as pydantic writes it: titles everywhere, object items as `$defs` (once each)."""
    out = copy.deepcopy(schema)
    out.pop("$schema", None)
    out["title"] = "".join(part.title() for part in name.split("_"))
    defs: dict[str, Any] = {}
    for key, prop in out.get("properties", {}).items():
        prop["title"] = key.replace("_", " ").title()
        items = prop.get("items")
        if isinstance(items, dict) and items.get("type") == "object":
            ref = key.title().replace("_", "")
            defs[ref] = {"title": ref, **items}
            prop["items"] = {"$ref": f"#/$defs/{ref}"}
    if defs:
        out["$defs"] = defs
    return out


def _schema_of(fmt: str, tool: dict[str, Any]) -> tuple[dict[str, Any], str]:
    if fmt == "openai_chat":
        return tool["function"], "parameters"
    return tool, "input_schema"


def rows() -> list[tuple[str, str, int, int]]:
    counters = TokenCounters()
    out = []
    for fmt, (model, slim) in SHAPES.items():
        counter = counters.for_model(model)
        for shape in ("fixture (TypeScript server)", "pydantic (Python server)"):
            tools = TOOLS_BY_FORMAT[fmt](120)
            if shape.startswith("pydantic"):
                for tool in tools:
                    holder, key = _schema_of(fmt, tool)
                    holder[key] = pydantic_shaped(holder[key], holder["name"])
            before = counter.count_tools(tools, None)
            after = counter.count_tools([slim(t) for t in tools], None)
            out.append((fmt, shape, before, after))
    return out


def main() -> int:
    print("| format | schemas | tool tokens | slimmed | saved |\n|---|---|---:|---:|---:|")
    for fmt, shape, before, after in rows():
        print(f"| {fmt} | {shape} | {before:,} | {after:,} | {1 - after / before:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
