"""Small hand-made conversations and a real PrepareContext for step and reducer unit tests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from shared_tokens import counter_for

from proxy.artifacts.store import Artifact, NewArtifact
from proxy.engine.policy import Policy
from proxy.engine.reducer import build_context
from proxy.engine.step_api import PrepareContext
from proxy.engine.steps.drop_turns import notice_text
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.tokens.counters import TokenCounter


@cache
def counter() -> TokenCounter:
    return counter_for("gpt-4o")


def artifact_id(text: str) -> str:
    """Deterministic stand-in for the store's HMAC: same text, same id."""
    return "art_" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def own_text_mac(text: str, scope: str = "s") -> str:
    """Deterministic stand-in for the store's MAC of the proxy's texts under `scope` (keyed
    differently from `artifact_id`, as the real one is)."""
    keyed = f"own-text:{scope}\x00{text}".encode("utf-8", "surrogatepass")
    return "art_" + hashlib.sha256(keyed).hexdigest()[:32]


def mac_for(scope: str) -> Callable[[str], str]:
    return lambda text: own_text_mac(text, scope)


def policy(**sections: Any) -> Policy:
    """A policy built from partial sections, e.g. policy(protect={"first_user": False})."""
    return Policy.model_validate(sections)


def make_ctx(
    messages: list[dict[str, Any]],
    pol: Policy | None = None,
    allowance: int = 100_000,
    scope: str = "s",
) -> PrepareContext:
    conversation = OPENAI_CHAT.parse(messages)
    assert conversation.ok, conversation.problems
    costs = [counter().count_message(m) for m in messages]
    pol = pol or policy()
    mac = mac_for(scope)
    return build_context(
        OPENAI_CHAT, messages, conversation, pol, counter(), costs, artifact_id, mac, allowance
    )


def notice_message(
    role: str, read_tool: bool, turns: int, tokens: int, artifact_id: str
) -> dict[str, Any]:
    """The drop-turns notice as a chat-completions message."""
    notice: dict[str, Any] = OPENAI_CHAT.notice_item(
        role, notice_text(read_tool, turns, tokens, artifact_id, own_text_mac)
    )
    return notice


def system(text: str = "You are a careful agent.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ],
    }


def result(call_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content, **extra}


def big(tag: str, chars: int) -> str:
    """A tool output of about `chars` characters whose text depends on `tag`."""
    line = f"{tag}: the quick brown fox jumps over the lazy dog 0123456789\n"
    return (line * (chars // len(line) + 1))[:chars]


class ConfirmingStore:
    """A store double: put_many confirms the items `confirm` accepts and records each call."""

    def __init__(self, confirm: Callable[[NewArtifact], bool]) -> None:
        self._confirm = confirm
        self.calls: list[tuple[str, list[NewArtifact], int, int]] = []
        self.ids: list[list[str]] = []

    def artifact_id(self, scope: str, content: str) -> str:
        raise AssertionError("ids are computed once, before the store is called")

    async def put_many(
        self, scope: str, items: Mapping[str, NewArtifact], *, ttl_seconds: int, max_per_scope: int
    ) -> set[str]:
        self.calls.append((scope, list(items.values()), ttl_seconds, max_per_scope))
        self.ids.append(list(items))
        return {aid for aid, item in items.items() if self._confirm(item)}

    async def get(self, scope: str, artifact_id: str) -> Artifact | None:
        raise AssertionError("the reducer never reads")

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        return None
