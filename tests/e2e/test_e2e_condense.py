"""condense_tool_results through the real server (openai SDK, chat): a 400-row JSON array tool
result goes upstream as a table, and the read tool returns the original byte for byte."""

from __future__ import annotations

import json

import openai
from fakes import FakeUpstream, completion
from synthetic_harness import CHAT, READ, SyntheticProxies, call_spec, calling, tool_results

from proxy.engine.condense_text import minify

ROWS = [
    {"id": i, "name": f"user{i}", "email": f"u{i}@example.com", "ok": i % 3 == 0}
    for i in range(400)
]
ORIGINAL = json.dumps(ROWS, indent=2)
PAGE = 4000
POLICY = (
    "extends: default\n"
    "steps: [{kind: condense_tool_results},\n"
    "        {kind: offload_tool_results, threshold_chars: 1000000},\n"
    "        {kind: clear_tool_results}, {kind: drop_turns}]\n"
    "read_tool: {max_rounds: 4}\n"
)


def request() -> dict[str, object]:
    call = {"id": "call_users", "type": "function", "function": {"name": "dump", "arguments": "{}"}}
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "Which users are ok?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_users", "content": ORIGINAL},
        ],
        "tools": [
            {"type": "function", "function": {"name": "dump", "parameters": {"type": "object"}}}
        ],
    }


async def test_a_400_row_array_goes_up_as_a_table_and_reads_back_whole(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(
        policies={"condense": POLICY}, tenants=[{"name": "default", "policy": "condense"}]
    )
    pages = range(0, len(ORIGINAL), PAGE)
    reads = [
        (
            lambda off: (
                lambda aid: call_spec(READ, {"artifact_id": aid, "offset": off, "max_chars": PAGE})
            )
        )(o)
        for o in pages
    ]
    fake_upstream.enqueue_many(calling(*reads), completion("Users 0, 3, 6 ... are ok."))
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
        reply = await client.chat.completions.create(**request())  # type: ignore[call-overload]
    assert reply.choices[0].message.content == "Users 0, 3, 6 ... are ok."
    first, second = fake_upstream.requests(CHAT)
    sent = first.json()["messages"][2]["content"]
    assert "condensed losslessly (table)" in sent.split("\n", 1)[0]
    header, *rows = sent.split("\n")[1:]
    assert header == "id|name|email|ok" and len(rows) == 400
    assert rows[3] == '3|"user3"|"u3@example.com"|true'
    keys = header.split("|")
    table = [dict(zip(keys, map(json.loads, r.split("|")), strict=True)) for r in rows]
    assert minify(table) == minify(ROWS)
    assert len(sent) < len(ORIGINAL) * 0.55
    results = tool_results(second)
    assert [r["offset"] for r in results] == list(pages)
    assert "".join(r["content"] for r in results) == ORIGINAL
