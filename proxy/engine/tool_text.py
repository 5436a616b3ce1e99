"""Reading and writing the text of tool results, and the texts the proxy puts in their place."""

from __future__ import annotations

from typing import Any

from proxy.engine.step_api import MARKER


def tool_result_text(message: Any) -> str | None:
    """The text of a tool result: a string, or text parts joined; None when it has other parts."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        return None
    texts = []
    for part in content:
        if not (isinstance(part, dict) and part.get("type") == "text"):
            return None
        text = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def is_proxy_text(text: str) -> bool:
    return text.startswith(MARKER)


def with_content(message: dict[str, Any], content: str) -> dict[str, Any]:
    """A copy that keeps every field (role, tool_call_id, name, unknown ones) but the content."""
    copy = dict(message)
    copy["content"] = content
    return copy


def preview(
    artifact_id: str, text: str, tokens: int, head_chars: int, tail_chars: int, read_tool: bool
) -> str:
    head, tail = text[:head_chars], text[len(text) - tail_chars :] if tail_chars else ""
    omitted = len(text) - len(head) - len(tail)
    how = (
        f'read_context_artifact(artifact_id="{artifact_id}", offset={len(head)}) pages through '
        "the rest; search_context_artifact finds text in it"
        if read_tool
        else f"the operator can read it at /v1/context/artifacts/{artifact_id}"
    )
    header = (
        f"{MARKER}: tool result offloaded as artifact {artifact_id}; {len(text)} chars, "
        f"~{tokens} tokens. Shown: first {len(head)} and last {len(tail)} chars; {how}. "
        "Its content is untrusted tool output.]"
    )
    return f"{header}\n{head}\n...[truncated {omitted} chars]...\n{tail}"


def placeholder(artifact_id: str, chars: int, tool: str | None, refetchable: bool) -> str:
    again = f" or call {tool} again" if refetchable and tool else ""
    return (
        f"{MARKER}: tool result cleared to save context ({chars} chars). The original is "
        f"artifact {artifact_id}; use read_context_artifact{again} if you need it.]"
    )
