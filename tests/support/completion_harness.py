"""Pieces of the `proxy.completion` unit tests: a context over the upstream double, prepared
requests with or without the synthetic tools, OpenAI answers and stream chunks, and a reader of
a `Reply`'s stream."""

from __future__ import annotations

import copy
import json
from typing import Any

from multidict import CIMultiDict
from upstream_double import UpstreamDouble

from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.completion.reply import Reply
from proxy.completion.run import CompletionContext
from proxy.engine.manifest import Manifest, Prepared, SyntheticTools
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.jsonio import dumps
from proxy.metrics import Metrics
from proxy.stats import RequestStats
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.registry import tool_specs

SCOPE = "tenant-a"
REQUEST_ID = "req-1"
ID = {"id": "chatcmpl-1", "created": 1700000000, "model": "gpt-4o"}
CLIENT_TOOL = {
    "type": "function",
    "function": {"name": "run_shell", "parameters": {"type": "object", "properties": {}}},
}
MESSAGES = [{"role": "user", "content": "what was in the log?"}]
EXTRA_HEADERS = {
    "x-ctxproxy-policy": "p",
    "x-ctxproxy-tokens-before": "10",
    "x-ctxproxy-tokens-after": "5",
    "x-ctxproxy-actions": "none",
    "x-ctxproxy-outcome": "unchanged",
}


def make_context(upstream: UpstreamDouble, store: MemoryStore | None = None) -> CompletionContext:
    return CompletionContext(
        upstream=upstream,
        headers=upstream_headers(),
        scope=SCOPE,
        store=store or MemoryStore(b"secret"),
        metrics=Metrics(),
        stats=RequestStats(),
        request_id=REQUEST_ID,
        wire=OPENAI_CHAT,
    )


def upstream_headers() -> CIMultiDict[str]:
    """What the edge hands over: the client's headers with the upstream credentials decided."""
    return CIMultiDict([("Authorization", "Bearer sk-up"), ("X-Tag", "t")])


def prepared(
    max_rounds: int | None = 2, *, client_tools: list[dict[str, Any]] | None = None, **extra: Any
) -> Prepared:
    """A prepared request; with `max_rounds` it carries the synthetic tools (and loops)."""
    body: dict[str, Any] = {"model": "gpt-4o", "messages": copy.deepcopy(MESSAGES), **extra}
    tools = copy.deepcopy([CLIENT_TOOL] if client_tools is None else client_tools)
    if max_rounds is not None:
        tools += OPENAI_CHAT.synthetic_tools(tool_specs(4000))
    body["tools"] = tools
    synthetic = None if max_rounds is None else SyntheticTools(max_rounds, max_page_chars=4000)
    manifest = Manifest(policy="p", model="gpt-4o", mode="window", tokens_before=10, tokens_after=5)
    return Prepared(dumps(body), True, manifest, body, synthetic)


async def stored(store: MemoryStore, content: str) -> str:
    artifact_id = store.artifact_id(SCOPE, content)
    await store.put_many(
        SCOPE,
        {artifact_id: NewArtifact(content, "tool_result", {})},
        ttl_seconds=60,
        max_per_scope=10,
    )
    return artifact_id


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


def read_call(call_id: str, artifact_id: str) -> dict[str, Any]:
    return tool_call(call_id, READ_TOOL, {"artifact_id": artifact_id})


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def answer(
    content: str | None, *calls: dict[str, Any], tokens: tuple[int, int] = (10, 2)
) -> dict[str, Any]:
    """A `chat.completion` with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    finish = "tool_calls" if calls else "stop"
    return {
        **ID,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage(*tokens),
    }


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **identity: Any
) -> dict[str, Any]:
    """A `chat.completion.chunk` with one choice."""
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return {**ID, **identity, "object": "chat.completion.chunk", "choices": [choice]}


def usage_chunk(prompt: int, completion: int, **identity: Any) -> dict[str, Any]:
    return {
        **ID,
        **identity,
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": usage(prompt, completion),
    }


def call_delta(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {
        "tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]
    }


async def drain(reply: Reply) -> list[bytes]:
    """Every item of the reply's stream, as the edge would write them; the stream is closed."""
    assert reply.stream is not None and reply.body is None
    try:
        return [item async for item in reply.stream]
    finally:
        await reply.stream.aclose()


def data_of(items: list[bytes]) -> list[Any]:
    """The `data:` payloads of the written bytes, parsed (`[DONE]` stays bytes)."""
    out: list[Any] = []
    for event in b"".join(items).split(b"\n\n"):
        if not event:
            continue
        assert event.startswith(b"data: ") and b"\n" not in event, event
        data = event.removeprefix(b"data: ")
        out.append(data if data == b"[DONE]" else json.loads(data))
    return out
