"""The requests of the dry-run snapshot (`dryrun_snapshot`), in the order they are sent.

`handmade()`: bodies built here (huge tool results, parallel tool calls, legacy function_call,
broken / orphan tool messages, unknown extra fields, unicode escapes, n=2, tools, max_tokens
variants, odd models, content parts, error cases ...); `quality()`: every request of
`bench.quality` for the seeds and turns asked (scenarios A-E of `bench.quality.gen.generate`, the
per-turn bodies of E included); `follow_up_labels()`: the requests whose answers get follow-ups.
Each request is (label, body bytes, content type). Deterministic: fixed seeds, no proxy imports.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from bench.quality.dryrun_bodies import TOOLS, agent, call, calls_msg, enc, result, text, tool
from bench.quality.gen import generate

# -- hand-made requests -----------------------------------------------------------------------

Add = Callable[..., None]
"""`add(label, body, content_type="application/json")`: one request of the set."""


def handmade() -> list[tuple[str, bytes, str]]:
    """(label, raw body, content type): deterministic, built without any proxy code."""
    rng = random.Random("ctxproxy-dryrun-snapshot")
    out: list[tuple[str, bytes, str]] = []

    def add(label: str, body: Any, ctype: str = "application/json") -> None:
        out.append((label, body if isinstance(body, bytes) else enc(body), ctype))

    for group in GROUPS:  # in this order: they draw from one generator
        group(rng, add)
    return out


def _agents(rng: random.Random, add: Add) -> None:
    """A small chat, agent loops with huge and many tool results, parallel tool calls."""
    add(
        "chat-small",
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hello!"},
            ],
        },
    )

    huge = agent(rng, 2, (500, 2000), names=["read_file"])
    huge["messages"][-1:-1] = [
        calls_msg([call("call_huge", "read_file", {"path": "dump.log"})]),
        result("call_huge", text(rng, 300_000)),
    ]
    add("huge-tool-result", huge)

    add(
        "agent-20-exchanges",
        agent(rng, 20, (500, 12_000), names=["read_file", "grep", "run_tests"]),
    )
    add("agent-60-exchanges-small", agent(rng, 60, (100, 900), names=["grep", "read_file"]))

    par = agent(rng, 1, (200, 400), names=["read_file"], prefix="seq")
    tail = par["messages"].pop()
    for r in range(6):
        ids = [f"par_{r}_{k}" for k in range(4)]
        names = ["read_file", "grep", "todo_write", "acme_lookup"]
        par["messages"].append(
            calls_msg(
                [call(i, n, {"q": f"{n}-{r}"}) for i, n in zip(ids, names, strict=True)],
                content="Looking at several things at once.",
            )
        )
        for i, n in zip(ids, names, strict=True):
            size = 9_000 if n == "read_file" else (300 if n == "todo_write" else 5_000)
            par["messages"].append(result(i, text(rng, size)))
    par["messages"].append(tail)
    par["parallel_tool_calls"] = True
    add("parallel-tool-calls", par)


def _legacy(rng: random.Random, add: Add) -> None:
    """Legacy `functions` / `function_call` messages."""
    legacy: dict[str, Any] = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Old-style function calling."},
            {"role": "user", "content": "Look up the weather in several cities."},
        ],
        "functions": [
            {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
        "function_call": "auto",
    }
    for k in range(8):
        legacy["messages"].append(
            {
                "role": "assistant",
                "content": None,
                "function_call": {
                    "name": "get_weather",
                    "arguments": json.dumps({"city": f"city-{k}"}),
                },
            }
        )
        legacy["messages"].append(
            {"role": "function", "name": "get_weather", "content": text(rng, 9_000)}
        )
    legacy["messages"].append({"role": "user", "content": "Summarise."})
    add("legacy-function-call", legacy)


def _broken_pairs(rng: random.Random, add: Add) -> None:
    """Orphan, missing, duplicate and misplaced tool results."""
    orphan = agent(rng, 8, (2_000, 9_000), names=["read_file"])
    orphan["messages"].insert(3, result("call_nobody", text(rng, 10_000)))
    add("orphan-tool-result", orphan)

    missing = agent(rng, 8, (2_000, 9_000), names=["read_file"])
    missing["messages"].insert(3, calls_msg([call("call_unanswered", "grep", {"q": "x"})]))
    add("missing-tool-result", missing)

    dup = agent(rng, 6, (2_000, 9_000), names=["read_file"])
    dup["messages"][-1:-1] = [
        calls_msg([call("call_000", "grep", {"q": "dup"})]),
        result("call_000", text(rng, 3_000)),
    ]
    add("duplicate-tool-call-id", dup)

    wrong_order = agent(rng, 6, (2_000, 9_000), names=["read_file"])
    m = wrong_order["messages"]
    m[4], m[5] = m[5], m[4]  # a result before its call
    add("result-before-call", wrong_order)


def _fields_and_unicode(rng: random.Random, add: Add) -> None:
    """Unknown extra fields; unicode escaped, raw, broken; odd JSON spacing."""
    extra = agent(rng, 10, (1_000, 9_000), names=["read_file", "grep"])
    extra.update(
        {
            "x_trace": {"span": "abc", "deep": [1, 2.5, None, True]},
            "metadata": {"a": "b"},
            "user": "user-42",
            "temperature": 0.2,
            "seed": 7,
            "logit_bias": {"50256": -100},
            "response_format": {"type": "json_object"},
            "store": False,
        }
    )
    for msg in extra["messages"]:
        msg["x_note"] = {"kept": True}
        for c in msg.get("tool_calls") or []:
            c["x_call_extra"] = 1
    extra["messages"][1]["name"] = "alice"
    add("unknown-extra-fields", extra)

    # Unicode written as JSON escapes (ASCII-only bytes), incl. a surrogate pair, U+2028, NUL.
    esc = agent(rng, 6, (2_000, 9_000), names=["read_file"])
    esc["messages"][1]["content"] = "caf\u00e9 \U0001f600 \u2028 line\u2029sep \x00nul \u202e rtl"
    esc["messages"][5]["content"] = "\U0001f600" * 2_000 + "\u00e9" * 3_000
    add("unicode-escapes", json.dumps(esc, ensure_ascii=True).encode())
    raw = agent(rng, 6, (2_000, 9_000), names=["read_file"])
    raw["messages"][5]["content"] = text(rng, 12_000, cjk=True)
    raw["messages"][2]["content"] = "e\u0301 n\u0303 \U0001f469\u200d\U0001f4bb  " * 50
    add("unicode-raw-utf8", raw)
    add("lone-surrogate", b'{"model":"gpt-4o","messages":[{"role":"user","content":"\\ud800x"}]}')
    add(
        "escaped-slash-and-whitespace",
        b'{ "model" : "gpt-4o" ,\n "messages" : [ {"role":'
        b'"user","content":"a\\/b \\"q\\" \\t\\n"} ] , "max_tokens" : 10 }\n',
    )


def _options(rng: random.Random, add: Add) -> None:
    """n=2, tool_choice, calls without tools, max_tokens variants, streaming."""
    n2 = agent(rng, 12, (1_000, 9_000), names=["read_file", "grep"])
    n2["n"] = 2
    add("n-2", n2)

    tc = agent(rng, 12, (1_000, 9_000), names=["read_file", "grep"])
    tc["tool_choice"] = {"type": "function", "function": {"name": "read_file"}}
    tc["parallel_tool_calls"] = False
    add("tools-tool-choice", tc)
    notools = agent(rng, 12, (1_000, 9_000), names=["read_file"])
    del notools["tools"]
    add("tool-calls-without-tools", notools)

    variants: list[tuple[str, dict[str, Any]]] = [
        ("max-tokens-100", {"max_tokens": 100}),
        ("max-completion-tokens-3000", {"max_completion_tokens": 3000}),
        ("max-tokens-both", {"max_tokens": 50, "max_completion_tokens": 2000}),
        ("max-tokens-huge", {"max_tokens": 2_000_000}),
        ("max-tokens-zero", {"max_tokens": 0}),
        ("max-tokens-string", {"max_tokens": "100"}),
        ("max-tokens-null", {"max_tokens": None}),
    ]
    for label, fields in variants:
        body = agent(random.Random(label), 10, (1_000, 6_000), names=["read_file", "grep"])
        body.update(fields)
        add(label, body)

    stream = agent(rng, 10, (1_000, 9_000), names=["read_file"])
    stream.update({"stream": True, "stream_options": {"include_usage": True}})
    add("stream", stream)


def _message_shapes(rng: random.Random, add: Add) -> None:
    """Content parts, extra roles, pinned text, excluded tools, long chatter, verbose JSON, a
    client tool named like the read tool."""
    parts = agent(rng, 8, (1_000, 9_000), names=["read_file"])
    parts["messages"][1]["content"] = [
        {"type": "text", "text": "Look at this screenshot."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBORw0KGgo" * 300}},
        {"type": "text", "text": text(rng, 2_000)},
    ]
    parts["messages"][5]["content"] = [{"type": "text", "text": text(rng, 15_000)}]
    add("content-parts", parts)

    roles = agent(rng, 8, (1_000, 9_000), names=["read_file"])
    roles["messages"].insert(1, {"role": "developer", "content": "Developer instructions."})
    roles["messages"].insert(3, {"role": "system", "content": "A second system message."})
    roles["messages"].insert(9, {"role": "system", "content": "A system message mid-way."})
    add("developer-and-system-roles", roles)

    pinned = agent(rng, 15, (1_000, 9_000), names=["read_file", "grep"])
    pinned["messages"].insert(
        3, {"role": "user", "content": "ACCEPTANCE CRITERIA: all green. " + text(rng, 1_500)}
    )
    add("pinned-acceptance-criteria", pinned)

    excluded = agent(rng, 10, (6_000, 12_000), names=["todo_write", "acme_lookup", "fetch_url"])
    add("excluded-and-refetchable-tools", excluded)

    chatter: dict[str, Any] = {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "You are a helpful assistant."}],
    }
    for _ in range(100):
        question = text(rng, rng.randint(50, 600))
        chatter["messages"].append({"role": "user", "content": question})
        answer = text(rng, rng.randint(50, 900))
        chatter["messages"].append({"role": "assistant", "content": answer})
    add("long-chatter-no-tools", chatter)

    js = agent(rng, 6, (100, 200), names=["acme_lookup"])
    for k, msg in enumerate(js["messages"]):
        if msg["role"] == "tool":
            msg["content"] = json.dumps(
                {
                    "rows": [
                        {"id": i, "name": f"row-{k}-{i}", "tags": ["a", "b"], "score": i * 0.5}
                        for i in range(300)
                    ]
                },
                indent=2,
            )
    add("verbose-json-tool-results", js)

    clash = agent(rng, 8, (1_000, 9_000), names=["read_file"])
    clash["tools"] = [*TOOLS, tool("read_context_artifact", artifact_id="string")]
    add("client-tool-named-like-read-tool", clash)


def _models(rng: random.Random, add: Add) -> None:
    """Known, unknown, prefixed, missing and non-string models."""
    for label, model in [
        ("model-gpt-4-8k", "gpt-4"),
        ("model-claude", "claude-3-5-sonnet-20241022"),
        ("model-unknown", "my-local-model"),
        ("model-azure-prefixed", "azure/eu/gpt-4o-2024-08-06"),
        ("model-o3-mini", "o3-mini"),
        ("model-gpt-4o-mini", "gpt-4o-mini"),
    ]:
        add(
            label,
            agent(
                random.Random(label), 16, (1_000, 9_000), names=["read_file", "grep"], model=model
            ),
        )
    nomodel = agent(rng, 3, (100, 300), names=["read_file"])
    del nomodel["model"]
    add("model-missing", nomodel)
    add("model-not-string", {"model": 123, "messages": [{"role": "user", "content": "x"}]})


def _errors(rng: random.Random, add: Add) -> None:
    """Broken messages, bodies that are not JSON objects, odd content types."""
    add("messages-empty", {"model": "gpt-4o", "messages": []})
    add("messages-missing", {"model": "gpt-4o"})
    add("messages-not-list", {"model": "gpt-4o", "messages": {"role": "user"}})
    add("message-not-object", {"model": "gpt-4o", "messages": ["hello"]})
    add("message-role-missing", {"model": "gpt-4o", "messages": [{"content": "hi"}]})
    add(
        "message-role-unknown",
        {"model": "gpt-4o", "messages": [{"role": "wizard", "content": "hi"}]},
    )
    add("user-content-null", {"model": "gpt-4o", "messages": [{"role": "user", "content": None}]})
    add(
        "tool-content-number",
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "user", "content": "x"},
                calls_msg([call("c1", "grep", {})]),
                result("c1", 42),
                {"role": "user", "content": "y"},
            ],
        },
    )
    add(
        "tool-calls-malformed",
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [{"id": 5}]},
                {"role": "user", "content": "y"},
            ],
        },
    )
    add("invalid-json", b'{"model":"gpt-4o","messages":[')
    add("json-array", b'[{"model":"gpt-4o"}]')
    add("empty-body", b"")
    add(
        "duplicate-keys",
        b'{"model":"gpt-4o","model":"gpt-4","messages":[{"role":"user","content":"a"}]}',
    )
    add(
        "text-plain",
        enc({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}),
        "text/plain",
    )
    add(
        "vendor-json-type",
        enc({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}),
        "application/vnd.acme+json; charset=utf-8",
    )


GROUPS = (
    _agents,
    _legacy,
    _broken_pairs,
    _fields_and_unicode,
    _options,
    _message_shapes,
    _models,
    _errors,
)
"""The hand-made requests, in the order they are sent."""


def quality(seeds: int, turns: int) -> list[tuple[str, bytes, str]]:
    out = []
    for seed in range(1, seeds + 1):
        for scenario in generate(seed, growing_turns=turns):
            for i, request in enumerate(scenario.requests):
                label = f"quality:s{seed}:{scenario.key}:{i:03d}"
                out.append((label, enc(request.body), "application/json"))
    return out


# -- follow-ups from a tenant's own answers -----------------------------------------------------

FOLLOW_UP = (
    "huge-tool-result",
    "agent-20-exchanges",
    "parallel-tool-calls",
    "legacy-function-call",
    "long-chatter-no-tools",
    "unicode-escapes",
    "n-2",
    "orphan-tool-result",
    "model-gpt-4-8k",
)


def follow_up_labels(quality_labels: list[str]) -> list[str]:
    """Hand-made ones plus the last request of each quality scenario."""
    last: dict[str, str] = {}
    for label in quality_labels:
        last[label.rsplit(":", 1)[0]] = label
    return [*FOLLOW_UP, *last.values()]
