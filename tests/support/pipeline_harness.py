"""A Preparer over real parts (policies from YAML, tiktoken, memory store) for pipeline tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared_tokens import shared_catalog

from proxy.artifacts.store import MemoryStore
from proxy.engine.manifest import Prepared
from proxy.engine.preparer import Preparer
from proxy.engine.step_api import MARKER
from proxy.engine.tool_text import TAG_CHARS, is_proxy_text, own_text_scope
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.http.auth import Tenant
from proxy.jsonio import dumps
from proxy.policy.store import PolicyStore
from proxy.tokens.counters import TokenCounters

TENANT = Tenant(name="t", policy="test", scope="t:scope", upstream_key=None, passthrough=True)

SMALL_BUDGET = """
extends: default
budget: {context_window: 8000, reserved_output: 1000, safety_margin: 0, trigger: 0.9, target: 0.6}
"""
SMALL = (
    SMALL_BUDGET
    + """
steps:
  - {kind: offload_tool_results, threshold_chars: 3000, preview_head_chars: 300,
     preview_tail_chars: 200}
  - {kind: clear_tool_results, keep_recent_exchanges: 1}
  - {kind: drop_turns, keep_recent_turns: 2}
"""
)
"""A small window (7,000 tokens of input) and the default steps with low thresholds."""


def client_bytes(body: Any) -> bytes:
    """`body` as a client might send it, unlike any re-serialisation by the proxy: the keys of
    every object in reverse order, a space after each separator, non-ASCII as `\\u00e9` escapes
    and a trailing newline. A test asserting "the client's bytes went out" then fails if the
    proxy sends `dumps(body)` instead."""
    text = json.dumps(_keys_reversed(body), ensure_ascii=True, separators=(", ", ": "))
    raw = (text + "\n").encode()
    assert raw != dumps(body)  # also != orjson.dumps(body), which `dumps` equals where it works
    return raw


def _keys_reversed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _keys_reversed(value[k]) for k in reversed(value)}
    if isinstance(value, list):
        return [_keys_reversed(v) for v in value]
    return value


@dataclass
class Harness:
    preparer: Preparer
    store: MemoryStore
    counters: TokenCounters

    async def prepare(self, body: dict[str, Any], tenant: Tenant = TENANT) -> Prepared:
        """Prepares `body`, sent as `client_bytes(body)` (see `Prepared.body` for what went out)."""
        return await self.preparer.prepare(body, client_bytes(body), tenant, OPENAI_CHAT)

    def own_text(self, content: object, scope: str = TENANT.scope) -> str:
        """`content` without its tag if the proxy wrote it for `scope` (the tag verifies), else ""
        (so `.startswith("[ctxproxy: ...")` asks "did the proxy write this, saying ...")."""

        def mac(text: str) -> str:
            return self.store.artifact_id(own_text_scope(scope), text)

        if not isinstance(content, str) or not is_proxy_text(content, mac):
            return ""
        return MARKER + content[len(MARKER) + 1 + TAG_CHARS :]


def write_policy(directory: Path, text: str, name: str = "test") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.yaml").write_text(text)


def make_harness(
    directory: Path, counters: TokenCounters, store: MemoryStore | None = None, **options: Any
) -> Harness:
    """`options`: more of `Preparer`'s keyword arguments."""
    store = store or MemoryStore(b"test-secret")
    preparer = Preparer(
        policies=PolicyStore.load(directory),
        counters=counters,
        catalog=shared_catalog(),
        store=store,
        **options,
    )
    return Harness(preparer, store, counters)


def agent_history(turns: int, result_chars: int = 6000, seed: int = 0) -> list[dict[str, Any]]:
    """System prompt, a task, then turns of (user, tool call, tool result, assistant answer)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Task: audit the repository."},
    ]
    for i in range(turns):
        if i:
            messages.append({"role": "user", "content": f"Next step {i}, please."})
        call_id = f"call_{seed}_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": f'{{"path": "src/f{i}.py"}}',
                        },
                    }
                ],
            }
        )
        body = "".join(
            f"line {n} of file {i}: value={(n * 7919 + i) % 10007}\n"
            for n in range(result_chars // 32)
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": body})
        messages.append({"role": "assistant", "content": f"File {i} looks fine."})
    return messages
