"""`anthropic_messages.cache_ttl`: how long the request's own message marks ask Anthropic to
keep the prompt cached (the format's `cache_ttl`)."""

from __future__ import annotations

from typing import Any

from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES

FIVE = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def text(mark: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "text", "text": "x", **({"cache_control": mark} if mark else {})}


def body(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": list(messages), **fields}


def test_no_marks_ask_for_nothing() -> None:
    plain = body({"role": "user", "content": "hi"}, {"role": "user", "content": [text()]})
    assert ANTHROPIC_MESSAGES.cache_ttl(plain) is None


def test_a_plain_mark_is_five_minutes_and_a_one_hour_mark_an_hour() -> None:
    assert ANTHROPIC_MESSAGES.cache_ttl(body({"role": "user", "content": [text(FIVE)]})) == 300
    both = body(
        {"role": "user", "content": [text(HOUR)]},
        {"role": "user", "content": [text({"type": "ephemeral", "ttl": "5m"})]},
    )
    assert ANTHROPIC_MESSAGES.cache_ttl(both) == 3600


def test_a_mark_inside_a_tool_result_counts() -> None:
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [text(HOUR)]}
    assert ANTHROPIC_MESSAGES.cache_ttl(body({"role": "user", "content": [result]})) == 3600


def test_marks_on_the_system_prompt_and_tools_do_not_count() -> None:
    """A cut never changes them: their hour keeps nothing a cut could break."""
    marked = body(
        {"role": "user", "content": [text(FIVE)]},
        system=[text(HOUR)],
        tools=[{"name": "t", "input_schema": {"type": "object"}, "cache_control": HOUR}],
    )
    assert ANTHROPIC_MESSAGES.cache_ttl(marked) == 300


def test_a_malformed_mark_is_read_leniently() -> None:
    odd = body({"role": "user", "content": [text({"type": "ephemeral", "ttl": 7}), "junk"]})
    assert ANTHROPIC_MESSAGES.cache_ttl(odd) == 300
    assert ANTHROPIC_MESSAGES.cache_ttl({"messages": "nope"}) is None
