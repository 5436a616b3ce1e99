"""Shared pieces of the synthetic-tool end-to-end tests: a small-window policy, a conversation whose
tool result gets offloaded, scripted synthetic calls, and a plain reader of the client's SSE bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fakes import FakeUpstream, Recorded, completion, dynamic_reply, stream_completion
from fakes.replies import Reply
from proxy_harness import RunningProxy, make_settings, start_proxy

from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import ArtifactStore, MemoryStore
from proxy.synthetic.base import CallContext, RoundBudget, SearchWorker, ToolResult
from proxy.synthetic.registry import execute

CLIENT_KEY = {"Authorization": "Bearer sk-test-client"}
"""A client's credential: a request without any has nothing stored for it (nothing offloaded)."""
READ = "read_context_artifact"
SEARCH = "search_context_artifact"
CHAT = "/v1/chat/completions"
ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")
UNKNOWN_ID = "art_" + "0" * 32
BIG = "\n".join(f"line {i}: value={i * 7919 % 10007}" for i in range(800))
CLIENT_TOOL = {
    "type": "function",
    "function": {"name": "dump", "description": "Dump the data", "parameters": {"type": "object"}},
}


def small_policy(max_rounds: int = 4, working_set: bool = True) -> str:
    return (
        "extends: default\n"
        "budget: {context_window: 4000, default_reserved_output: 500}\n"
        "steps: [{kind: offload_tool_results, threshold_chars: 2000}, {kind: clear_tool_results},\n"
        "        {kind: drop_turns}]\n"
        f"read_tool: {{max_rounds: {max_rounds}, working_set: {str(working_set).lower()}}}\n"
    )


class SyntheticProxies:
    """Starts proxies whose default tenant uses the small-window policy; `stop_all` afterwards.

    `store` is the proxies' store settings (the memory store, or Redis under a test's prefix);
    a `store=` given to `start` overrides single keys of it (e.g. another secret).
    """

    def __init__(
        self, fake: FakeUpstream, tmp_path: Path, store: dict[str, Any] | None = None
    ) -> None:
        self._fake = fake
        self._tmp_path = tmp_path
        self._store = store or {"secret": "test-secret"}
        self._running: list[RunningProxy] = []

    async def start(
        self,
        max_rounds: int = 4,
        working_set: bool = True,
        policies: dict[str, str] | None = None,
        **settings: Any,
    ) -> RunningProxy:
        """`policies`: more policy files (name -> YAML) beside the small-window one."""
        directory = self._tmp_path / f"policies-{len(self._running)}"
        directory.mkdir()
        (directory / "small.yaml").write_text(small_policy(max_rounds, working_set))
        for name, text in (policies or {}).items():
            (directory / f"{name}.yaml").write_text(text)
        settings.setdefault("tenants", [{"name": "default", "policy": "small"}])
        settings["store"] = {**self._store, **settings.get("store", {})}
        proxy = await start_proxy(
            make_settings(self._fake.base_url, policies_dir=str(directory), **settings)
        )
        self._running.append(proxy)
        want = MemoryStore if settings["store"].get("kind", "memory") == "memory" else RedisStore
        assert isinstance(proxy.services.store, want), "the store under test is not in use"
        return proxy

    def another_deployment(self, secret: str) -> dict[str, Any]:
        """`store=` for a proxy of another deployment: its own secret and, on Redis, its own
        keys (a key prefix under this test's, so they are deleted with it)."""
        store: dict[str, Any] = {"secret": secret}
        if self._store.get("kind", "memory") != "memory":
            store["key_prefix"] = f"{self._store['key_prefix']}other:"
        return store

    async def stop_all(self) -> None:
        for proxy in self._running:
            await proxy.stop()


def conversation(**extra: Any) -> dict[str, Any]:
    """A request whose tool result (BIG) is too large for the small window: it is offloaded."""
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "What is the value on line 512?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_dump",
                        "type": "function",
                        "function": {"name": "dump", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_dump", "content": BIG},
        ],
        "tools": [CLIENT_TOOL],
        **extra,
    }


def artifact_id_in(record: Recorded) -> str:
    """The artifact id named in the offloaded tool result the upstream received."""
    messages = record.json()["messages"]
    found = ARTIFACT_ID.search(messages[2]["content"])
    assert found is not None, "the tool result was not offloaded"
    return found.group(0)


def tool_names(record: Recorded) -> list[str]:
    return [t["function"]["name"] for t in record.json().get("tools", [])]


def call_spec(name: str, arguments: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "arguments": json.dumps(arguments)}
    if call_id:
        spec["id"] = call_id
    return spec


def calling(
    *calls: Callable[[str], dict[str, Any]],
    stream: bool = False,
    text: str = "",
    usage: dict[str, Any] | None = None,
) -> Reply:
    """A reply asking for tool calls; each call is built from the request's artifact id."""

    def choose(record: Recorded) -> Reply:
        aid = artifact_id_in(record)
        specs = [make(aid) for make in calls]
        if stream:
            return stream_completion([text] if text else [], tool_calls=specs, usage=usage)
        return completion(text or None, tool_calls=specs, usage=usage)

    return dynamic_reply(choose)


def read_call(
    offset: int, max_chars: int, artifact_id: str | None = None
) -> Callable[[str], dict[str, Any]]:
    return lambda aid: call_spec(
        READ, {"artifact_id": artifact_id or aid, "offset": offset, "max_chars": max_chars}
    )


def tool_results(record: Recorded) -> list[dict[str, Any]]:
    """The synthetic results the proxy appended (tool messages after the client's own)."""
    messages = record.json()["messages"]
    return [json.loads(m["content"]) for m in messages[3:] if m["role"] == "tool"]


def sse_data(raw: bytes) -> list[bytes]:
    """The `data:` payloads of a well-formed SSE body, in order."""
    events = [e for e in raw.replace(b"\r\n", b"\n").split(b"\n\n") if e.strip()]
    out = []
    for event in events:
        lines = [ln[len(b"data: ") :] for ln in event.split(b"\n") if ln.startswith(b"data: ")]
        assert lines, f"event without data: {event!r}"
        out.append(b"\n".join(lines))
    return out


def sse_chunks(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(d) for d in sse_data(raw) if d != b"[DONE]"]


def streamed_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )


async def call_tool(
    store: ArtifactStore,
    scope: str,
    name: str,
    arguments: str | dict[str, Any],
    *,
    max_page_chars: int,
    budget: RoundBudget | None = None,
    worker: SearchWorker | None = None,
) -> ToolResult:
    """One synthetic call on its own (a fresh round budget unless one is given)."""
    context = CallContext(store, scope, max_page_chars, budget or RoundBudget(), worker)
    return await execute(name, arguments, context)
