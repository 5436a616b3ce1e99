"""The `find_tools` ranking's hit rate on the fixture's (query, expected tool) pairs
(`python -m bench.tools.ranking`): top-1 and top-3 over the 120 tools, and the misses."""

from __future__ import annotations

from bench.tools.fixture import TOOLS_BY_FORMAT, queries
from proxy.formats.tool_defs import chat_tool_entry
from proxy.synthetic.catalog import ToolCatalog


def hit_rates() -> tuple[int, int, int, list[tuple[str, str, list[str]]]]:
    """(top-1 hits, top-3 hits, pairs, misses as (query, expected, top 3))."""
    tools = TOOLS_BY_FORMAT["openai_chat"](120)
    catalog = ToolCatalog(tuple(e for t in tools if (e := chat_tool_entry(t)) is not None))
    top1 = top3 = 0
    misses = []
    pairs = queries()
    for query, expected in pairs:
        ranked = [e.name for e in catalog.ranked(query, 3)]
        top1 += ranked[:1] == [expected]
        top3 += expected in ranked
        if expected not in ranked:
            misses.append((query, expected, ranked))
    return top1, top3, len(pairs), misses


def main() -> int:
    top1, top3, pairs, misses = hit_rates()
    print(f"pairs: {pairs}; top-1: {top1} ({top1 / pairs:.1%}); top-3: {top3} ({top3 / pairs:.1%})")
    for query, expected, ranked in misses:
        print(f"- miss: {query!r} -> expected {expected}, got {', '.join(ranked) or 'nothing'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
