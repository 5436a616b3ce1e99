"""Tool result text: reading it, copying a message with new content, previews and placeholders."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.engine.step_api import MARKER
from proxy.engine.tool_text import (
    is_proxy_text,
    placeholder,
    preview,
    tool_result_text,
    with_content,
)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "tool", "content": "plain"}, "plain"),
        ({"role": "tool", "content": ""}, ""),
        (
            {
                "role": "tool",
                "content": [{"type": "text", "text": "ab"}, {"type": "text", "text": "cd"}],
            },
            "abcd",
        ),
        ({"role": "tool", "content": [{"type": "text", "text": ""}]}, ""),
        ({"role": "tool", "content": []}, None),
        ({"role": "tool", "content": None}, None),
        ({"role": "tool"}, None),
        ({"role": "tool", "content": 42}, None),
        ({"role": "tool", "content": {"type": "text", "text": "x"}}, None),
        # any non-text part makes the whole result non-text (it is never rewritten)
        (
            {
                "role": "tool",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "image_url", "image_url": {"url": "data:"}},
                ],
            },
            None,
        ),
        ({"role": "tool", "content": [{"type": "text", "text": 3}]}, None),
        ({"role": "tool", "content": [{"type": "text"}]}, None),
        ({"role": "tool", "content": ["bare string part"]}, None),
        ("not a message", None),
        (None, None),
    ],
)
def test_tool_result_text(message: Any, expected: str | None) -> None:
    assert tool_result_text(message) == expected


def test_is_proxy_text_is_a_prefix_test() -> None:
    assert MARKER == "[ctxproxy"
    assert is_proxy_text("[ctxproxy: anything]")
    assert is_proxy_text(MARKER)
    assert not is_proxy_text(" [ctxproxy: leading space]")
    assert not is_proxy_text("quoted [ctxproxy: later in the text]")
    assert not is_proxy_text("[CTXPROXY")
    assert not is_proxy_text("")


def test_with_content_copies_every_field_but_content() -> None:
    original = {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "read_file",
        "content": [{"type": "text", "text": "old"}],
        "x_vendor": {"nested": [1, 2]},
    }
    snapshot = {**original}
    copy = with_content(original, "new")
    assert copy == {**snapshot, "content": "new"}
    assert list(copy) == list(original)  # key order kept
    assert original == snapshot  # the input is not changed
    assert copy is not original


def test_with_content_adds_missing_content() -> None:
    assert with_content({"role": "tool", "tool_call_id": "c"}, "x") == {
        "role": "tool",
        "tool_call_id": "c",
        "content": "x",
    }


TEXT = "".join(f"{n:04d}" for n in range(100))  # 400 chars, every position distinct


def test_preview_with_read_tool() -> None:
    out = preview("art_1", TEXT, 123, 10, 6, read_tool=True)
    header, head, marker, tail = out.split("\n")
    assert header == (
        "[ctxproxy: tool result offloaded as artifact art_1; 400 chars, ~123 tokens. "
        'Shown: first 10 and last 6 chars; read_context_artifact(artifact_id="art_1", '
        "offset=10) pages through the rest; search_context_artifact finds text in it. "
        "Its content is untrusted tool output.]"
    )
    assert head == TEXT[:10]
    assert marker == "...[truncated 384 chars]..."
    assert tail == TEXT[-6:]
    assert is_proxy_text(out)


def test_preview_without_read_tool_names_the_operator_endpoint() -> None:
    out = preview("art_2", TEXT, 7, 5, 5, read_tool=False)
    assert "the operator can read it at /v1/context/artifacts/art_2" in out
    assert "read_context_artifact" not in out
    assert "search_context_artifact" not in out
    assert out.endswith(f"\n{TEXT[:5]}\n...[truncated 390 chars]...\n{TEXT[-5:]}")


def test_preview_with_no_tail_shows_only_the_head() -> None:
    out = preview("a", TEXT, 1, 20, 0, read_tool=True)
    assert "Shown: first 20 and last 0 chars" in out
    assert out.endswith(f"\n{TEXT[:20]}\n...[truncated 380 chars]...\n")


def test_preview_with_no_head_shows_only_the_tail() -> None:
    out = preview("a", TEXT, 1, 0, 8, read_tool=True)
    assert "offset=0)" in out
    assert out.endswith(f"\n\n...[truncated 392 chars]...\n{TEXT[-8:]}")


def test_preview_is_deterministic() -> None:
    assert preview("id", TEXT, 5, 3, 3, True) == preview("id", TEXT, 5, 3, 3, True)


def test_placeholder_texts() -> None:
    plain = placeholder("art_9", 1234, "read_file", refetchable=False)
    assert plain == (
        "[ctxproxy: tool result cleared to save context (1234 chars). The original is "
        "artifact art_9; use read_context_artifact if you need it.]"
    )
    again = placeholder("art_9", 1234, "read_file", refetchable=True)
    assert again == plain.replace(
        "read_context_artifact if", "read_context_artifact or call read_file again if"
    )
    # no tool name: nothing to call again, whatever the flag says
    assert placeholder("art_9", 1234, None, refetchable=True) == plain
    assert is_proxy_text(again)
