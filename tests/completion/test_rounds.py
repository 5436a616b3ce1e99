"""`proxy.completion.rounds`: round state, the bodies it builds, and how answers are filtered."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from artifacts_harness import keyed
from chat_bodies import (
    CLIENT_TOOL,
    MESSAGES,
    answer,
    body_with,
    call,
    choice_of,
    message,
    tool_names,
)
from multidict import CIMultiDict
from upstream_double import UpstreamDouble, json_answer

from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.completion.rounds import (
    CONCURRENT_CALLS,
    READS_HEADER,
    ROUNDS_HEADER,
    SyntheticRounds,
)
from proxy.engine.manifest import SyntheticTools
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.answers import (
    strip_synthetic_calls,
    synthetic_only,
    without_synthetic_tools,
)
from proxy.jsonio import loads
from proxy.metrics import Metrics
from proxy.stats import RequestStats
from proxy.synthetic.base import MAX_CALLS_PER_ROUND
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.search import SEARCH_TOOL

SCOPE = "tenant-a"


# -- SyntheticRounds ---------------------------------------------------------------------------


def make_rounds(
    body: dict[str, Any],
    *,
    max_rounds: int,
    store: MemoryStore | None = None,
    upstream: UpstreamDouble | None = None,
) -> SyntheticRounds:
    return SyntheticRounds(
        upstream=upstream or UpstreamDouble(),
        upstream_headers=CIMultiDict({"Authorization": "Bearer sk-up"}),
        store=store or MemoryStore(b"secret"),
        scope=SCOPE,
        tools=SyntheticTools(max_rounds=max_rounds, max_page_chars=4000),
        body=body,
        metrics=Metrics(),
        stats=RequestStats(),
        request_id="req-1",
        wire=OPENAI_CHAT,
    )


async def test_each_round_is_a_chat_completion_with_the_upstream_headers() -> None:
    upstream = UpstreamDouble(json_answer({"id": "x"}))
    rounds = make_rounds(body_with([]), max_rounds=1, upstream=upstream)
    answer = await rounds.open(b'{"round": 1}')
    assert await answer.read() == b'{"id": "x"}'
    [sent] = upstream.calls
    assert (sent.method, sent.path, sent.body) == ("POST", "/chat/completions", b'{"round": 1}')
    assert sent.headers["Authorization"] == "Bearer sk-up"
    assert [c.upstream for c in rounds.stats.upstream_calls] == ["fake"]


def test_first_body_is_the_prepared_bytes_while_a_round_is_allowed() -> None:
    prepared = b'{"exact": "bytes" }'
    rounds = make_rounds(body_with([CLIENT_TOOL]), max_rounds=1)
    assert rounds.first_body(prepared) is prepared


def test_zero_rounds_first_body_has_no_synthetic_tools() -> None:
    body = body_with([CLIENT_TOOL], tool_choice=choice_of(READ_TOOL))
    first = loads(make_rounds(body, max_rounds=0).first_body(b"unused"))
    assert tool_names(first) == ["run_shell"] and "tool_choice" not in first
    assert first["messages"] == MESSAGES


@pytest.mark.parametrize(
    ("n", "multiple"),
    [(None, False), (1, False), (2, True), (True, False), ("3", False), (2.0, True)],
)
def test_several_choices_never_loop(n: Any, multiple: bool) -> None:
    body = body_with([]) | ({} if n is None else {"n": n})
    rounds = make_rounds(body, max_rounds=3)
    assert rounds.multiple_choices is multiple
    assert rounds.loop_allowed is not multiple


def test_several_choices_are_not_offered_the_synthetic_tools() -> None:
    # Issue 11 item 11: with n=2 a read call could not be run and the client got `content: null`.
    body = body_with([CLIENT_TOOL], n=2, tool_choice=choice_of(READ_TOOL))
    first = loads(make_rounds(body, max_rounds=3).first_body(b"the prepared bytes"))
    assert tool_names(first) == ["run_shell"] and "tool_choice" not in first
    assert first["n"] == 2


async def test_rounds_grow_the_conversation_and_the_last_allowed_round_drops_the_tools() -> None:
    store = MemoryStore(b"secret")
    content = "line 1\nline 2\n"
    await store.put_many(
        SCOPE,
        keyed(store, SCOPE, NewArtifact(content, "tool_result", {})),
        ttl_seconds=60,
        max_per_scope=10,
    )
    artifact_id = store.artifact_id(SCOPE, content)
    body = body_with([CLIENT_TOOL], tool_choice=choice_of(SEARCH_TOOL), parallel_tool_calls=True)
    rounds = make_rounds(body, max_rounds=2, store=store)
    assert rounds.loop_allowed

    calls = [
        call("c1", READ_TOOL, json.dumps({"artifact_id": artifact_id})),
        call("c2", SEARCH_TOOL, {"artifact_id": artifact_id, "pattern": "LINE 2"}),
    ]
    await rounds.execute("let me look", calls)
    assert (rounds.rounds, rounds.reads) == (1, 2)
    assert rounds.loop_allowed
    second = loads(await rounds.next_body())
    assert tool_names(second) == ["run_shell", READ_TOOL, SEARCH_TOOL]
    assert second["tool_choice"] == choice_of(SEARCH_TOOL)
    assert second["messages"][:2] == MESSAGES
    assistant, read, search = second["messages"][2:]
    assert assistant == {"role": "assistant", "content": "let me look", "tool_calls": calls}
    assert read["role"] == "tool" and read["tool_call_id"] == "c1"
    assert json.loads(read["content"])["content"] == content
    assert search["tool_call_id"] == "c2"
    assert json.loads(search["content"])["total_matches"] == 1

    await rounds.execute(None, [call("c3", READ_TOOL, {"artifact_id": "art_" + "0" * 32})])
    assert (rounds.rounds, rounds.reads) == (2, 3)
    assert not rounds.loop_allowed
    last = loads(await rounds.next_body())
    assert tool_names(last) == ["run_shell"]
    assert "tool_choice" not in last and last["parallel_tool_calls"] is True
    assert len(last["messages"]) == 2 + 3 + 2
    assert json.loads(last["messages"][-1]["content"])["error"]["code"] == "artifact_not_found"

    assert body["messages"] == MESSAGES  # the prepared body is never mutated
    assert rounds.response_headers() == {ROUNDS_HEADER: "2", READS_HEADER: "3"}
    stats = rounds.stats
    assert (stats.synthetic_rounds, stats.artifact_reads) == (2, 3)


async def test_last_round_without_client_tools_sends_no_tools_at_all() -> None:
    body = body_with([], tool_choice="required", parallel_tool_calls=False)
    rounds = make_rounds(body, max_rounds=1)
    await rounds.execute(None, [call("c1", READ_TOOL, "not json")])
    last = loads(await rounds.next_body())
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(last)
    assert last["messages"][-1]["tool_call_id"] == "c1"
    assert json.loads(last["messages"][-1]["content"])["error"]["code"] == "invalid_arguments"


def named_tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": "the client's"}}


@pytest.mark.parametrize(
    ("client_names", "read", "search"),
    [
        ([READ_TOOL], READ_TOOL + "_ctxproxy", SEARCH_TOOL),
        ([SEARCH_TOOL, "run_shell"], READ_TOOL, SEARCH_TOOL + "_ctxproxy"),
        (
            [READ_TOOL, READ_TOOL + "_ctxproxy", SEARCH_TOOL],
            READ_TOOL + "_ctxproxy2",
            SEARCH_TOOL + "_ctxproxy",
        ),
    ],
)
def test_a_client_tool_never_shares_a_name_with_the_proxys(
    client_names: list[str], read: str, search: str
) -> None:
    # Issue 11 item 10: the client's `read_context_artifact` was sent twice and taken over.
    client_tools = [named_tool(name) for name in client_names]
    rounds = make_rounds(body_with(client_tools), max_rounds=2)
    own = rounds.names.own
    assert (own("read_context_artifact"), own("search_context_artifact")) == (read, search)
    first = loads(rounds.first_body(b"the prepared bytes carry the clashing names"))
    assert tool_names(first) == [*client_names, read, search]
    assert first["tools"][: len(client_names)] == client_tools  # the client's, untouched
    names = tool_names(first)
    assert len(set(names)) == len(names)
    own = first["tools"][len(client_names) :]
    renamed = [t for t in own if t["function"]["name"] not in (READ_TOOL, SEARCH_TOOL)]
    assert all(
        "Notices in this conversation call this tool" in t["function"]["description"]
        for t in renamed
    )
    last = without_synthetic_tools(first, rounds.names)
    assert tool_names(last) == client_names


async def test_only_the_proxys_names_are_executed() -> None:
    store = MemoryStore(b"secret")
    await store.put_many(
        SCOPE, keyed(store, SCOPE, NewArtifact("data", "k", {})), ttl_seconds=60, max_per_scope=9
    )
    artifact_id = store.artifact_id(SCOPE, "data")
    rounds = make_rounds(body_with([named_tool(READ_TOOL)]), max_rounds=1, store=store)
    own = call("s1", READ_TOOL + "_ctxproxy", json.dumps({"artifact_id": artifact_id}))
    clients = call("k1", READ_TOOL, json.dumps({"artifact_id": artifact_id}))
    assert synthetic_only(answer(message(None, clients)), rounds.names) is None
    assert synthetic_only(answer(message(None, own)), rounds.names) == (None, [own])
    mixed = answer(message(None, own, clients))
    assert strip_synthetic_calls(mixed, rounds.names) is True
    assert mixed["choices"][0]["message"]["tool_calls"] == [clients]
    await rounds.execute(None, [own])
    result = json.loads(loads(await rounds.next_body())["messages"][-1]["content"])
    assert result["content"] == "data"
    assert tool_names(loads(await rounds.next_body())) == [READ_TOOL]  # the client's stays


async def test_the_calls_of_a_round_get_unique_ids_in_the_follow_up() -> None:
    # Issue 11 item 11: missing, empty or repeated ids gave `tool_call_id: null` or duplicates.
    history = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [call("old", "run_shell")]},
        {"role": "tool", "tool_call_id": "old", "content": "done"},
    ]
    body = body_with([CLIENT_TOOL]) | {"messages": history}
    rounds = make_rounds(body, max_rounds=3)
    missing = call("x", READ_TOOL, "{}")
    del missing["id"]
    calls = [
        missing,
        call("", READ_TOOL),
        call("dup", READ_TOOL),
        call("dup", SEARCH_TOOL),
        call("old", READ_TOOL),
        {**call("x", READ_TOOL), "id": 7},
    ]
    await rounds.execute(None, calls)
    await rounds.execute(None, [call("dup", READ_TOOL), call("dup", READ_TOOL)])
    messages = loads(await rounds.next_body())["messages"]
    ids = [c["id"] for m in messages if m.get("tool_calls") for c in m["tool_calls"]]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert ids == results  # every call answered, in order
    assert len(set(ids)) == len(ids) and all(isinstance(i, str) and i for i in ids)
    assert ids == [
        "old",
        "call_ctxproxy_1_0",
        "call_ctxproxy_1_1",
        "dup",
        "call_ctxproxy_1_3",
        "call_ctxproxy_1_4",
        "call_ctxproxy_1_5",
        "call_ctxproxy_2_0",
        "call_ctxproxy_2_1",
    ]
    assert calls[2]["id"] == "dup" and "id" not in missing  # the answer's calls are not changed


async def test_the_searches_of_a_round_share_one_budget() -> None:
    store = MemoryStore(b"secret")
    content = "x" * 100
    await store.put_many(
        SCOPE, keyed(store, SCOPE, NewArtifact(content, "k", {})), ttl_seconds=60, max_per_scope=9
    )
    arguments = json.dumps({"artifact_id": store.artifact_id(SCOPE, content), "pattern": "x"})
    rounds = make_rounds(body_with([]), max_rounds=3, store=store)
    rounds.search_chars_per_round = 250
    for _ in range(2):
        await rounds.execute(None, [call(f"s{i}", SEARCH_TOOL, arguments) for i in range(3)])
    results = [json.loads(m["content"]) for m in rounds.messages if m["role"] == "tool"]
    codes = [r.get("error", {}).get("code") for r in results]
    assert codes == [None, None, "search_budget_exhausted"] * 2  # a fresh budget each round


class _CountingStore(MemoryStore):
    """Records how many `get`s run at once."""

    def __init__(self) -> None:
        super().__init__(b"secret")
        self.running = self.most = 0

    async def get(self, scope: str, artifact_id: str) -> Any:
        self.running += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0.001)
        self.running -= 1
        return await super().get(scope, artifact_id)


async def test_a_round_runs_a_bounded_number_of_calls_a_few_at_a_time() -> None:
    store = _CountingStore()
    await store.put_many(
        SCOPE, keyed(store, SCOPE, NewArtifact("data", "k", {})), ttl_seconds=60, max_per_scope=9
    )
    arguments = json.dumps({"artifact_id": store.artifact_id(SCOPE, "data")})
    rounds = make_rounds(body_with([]), max_rounds=3, store=store)
    await rounds.execute(None, [call(f"c{i}", READ_TOOL, arguments) for i in range(40)])
    results = [json.loads(m["content"]) for m in rounds.messages if m["role"] == "tool"]
    assert len(results) == 40  # every call is answered
    assert [r.get("content") for r in results[:MAX_CALLS_PER_ROUND]] == ["data"] * 32
    codes = {r["error"]["code"] for r in results[MAX_CALLS_PER_ROUND:]}
    assert codes == {"too_many_calls"}
    assert store.most == CONCURRENT_CALLS
