"""Invariants of `engine.tool_deferral.defer_tools` over drawn histories: what is sent is the
kept tools in the client's order, then the used tools in the order of their first use (the most
recent `recent_tools` of them), then the search tool; the same history gives the same list; a
later turn that uses no new tool keeps the list."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_tools import chat_tools
from shared_tokens import counter_for

from proxy.engine.manifest import Manifest
from proxy.engine.steps.defer_tools import DeferToolsConfig
from proxy.engine.tool_deferral import defer_tools
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.synthetic.find_tools import FIND_TOOLS

TOOLS = chat_tools(40)
NAMES = [t["function"]["name"] for t in TOOLS]
COUNTER = counter_for("gpt-4o")


def history(used: list[str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, name in enumerate(used):
        function = {"name": name, "arguments": "{}"}
        calls = [{"id": f"c{i}", "type": "function", "function": function}]
        items.append({"role": "assistant", "content": None, "tool_calls": calls})
        items.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"})
    return items


def sent(used: list[str], config: DeferToolsConfig) -> list[str]:
    body = {"model": "gpt-4o", "messages": history(used), "tools": TOOLS}
    deferral = defer_tools(config, OPENAI_CHAT, body, body["messages"], 0, COUNTER, 100_000,
                           Manifest("p", "gpt-4o", "window"))  # fmt: skip
    assert deferral is not None
    return [t["function"]["name"] for t in deferral.body["tools"]]


@settings(deadline=None)
@given(
    used=st.lists(st.sampled_from(NAMES), max_size=12),
    recent=st.integers(0, 6),
    keep=st.sampled_from([[], ["github_*"], ["*_file"]]),
)
def test_the_list_sent_is_kept_then_used_then_search(
    used: list[str], recent: int, keep: list[str]
) -> None:
    config = DeferToolsConfig(budget=200, keep=keep, recent_tools=recent)
    out = sent(used, config)
    assert out == sent(used, config)  # deterministic
    assert out[-1] == FIND_TOOLS
    kept = [n for n in NAMES if config.keep and any(_match(n, p) for p in config.keep)]
    assert out[: len(kept)] == kept
    loaded = out[len(kept) : -1]
    candidates = [n for n in dict.fromkeys(used) if n not in kept]
    assert loaded == [n for n in candidates if n in loaded]  # in the order of first use
    latest = list(dict.fromkeys(reversed([n for n in used if n not in kept])))[:recent]
    assert sorted(loaded) == sorted(latest)
    for name in loaded[:1]:  # the next turn calls a tool already sent: the same list
        assert sent([*used, name], config) == out


def _match(name: str, pattern: str) -> bool:
    return fnmatchcase(name, pattern)
