"""Preparer: broken messages in a request under its trigger (nothing to reduce): `on_invalid:
reject` still parses and refuses them; `forward` skips the parse and forwards the client's bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeline_harness import agent_history, client_bytes, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.errors import ErrorCode, ProxyError, RefusalReason

UNDER = "extends: default\nbudget: {context_window: 128000}\n"


def broken() -> dict[str, object]:
    """A short history whose second tool result answers no call."""
    messages = agent_history(2, result_chars=200)
    calls = [i for i, m in enumerate(messages) if m.get("tool_calls")]
    del messages[calls[1]]
    return {"model": "gpt-4o", "messages": messages}


async def test_reject_refuses_broken_messages_under_the_trigger(tmp_path: Path) -> None:
    write_policy(tmp_path, UNDER + "on_invalid: reject\n")
    with pytest.raises(ProxyError) as caught:
        await make_harness(tmp_path, shared_counters()).prepare(broken())
    assert caught.value.code is ErrorCode.invalid_messages
    assert caught.value.reason is RefusalReason.invalid_messages


async def test_forward_sends_broken_messages_under_the_trigger_as_they_came(
    tmp_path: Path,
) -> None:
    write_policy(tmp_path, UNDER + "on_invalid: forward\n")
    body = broken()
    prepared = await make_harness(tmp_path, shared_counters()).prepare(body)
    assert prepared.manifest.outcome == "within_trigger" and not prepared.changed
    assert prepared.body == client_bytes(body)
