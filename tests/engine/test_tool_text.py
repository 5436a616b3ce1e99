"""The texts the proxy writes in place of tool results: previews and placeholders.

Reading a result's text and copying a message with new content are the format's business
(tests/formats/test_openai_chat_fields.py)."""

from __future__ import annotations

from proxy.engine.step_api import MARKER
from proxy.engine.tool_text import is_proxy_text, placeholder, preview


def test_is_proxy_text_is_a_prefix_test() -> None:
    assert MARKER == "[ctxproxy"
    assert is_proxy_text("[ctxproxy: anything]")
    assert is_proxy_text(MARKER)
    assert not is_proxy_text(" [ctxproxy: leading space]")
    assert not is_proxy_text("quoted [ctxproxy: later in the text]")
    assert not is_proxy_text("[CTXPROXY")
    assert not is_proxy_text("")


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
