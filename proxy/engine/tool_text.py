"""The texts the proxy puts in place of tool results (reading and writing a result's text is the
wire format's business: `engine.wire.WireFormat.result_text`/`with_result_text`)."""

from __future__ import annotations

from proxy.artifacts.read_tool import READ_TOOL, SEARCH_TOOL
from proxy.engine.step_api import MARKER


def is_proxy_text(text: str) -> bool:
    return text.startswith(MARKER)


def preview(
    artifact_id: str, text: str, tokens: int, head_chars: int, tail_chars: int, read_tool: bool
) -> str:
    head, tail = text[:head_chars], text[len(text) - tail_chars :] if tail_chars else ""
    omitted = len(text) - len(head) - len(tail)
    how = (
        f'{READ_TOOL}(artifact_id="{artifact_id}", offset={len(head)}) pages through '
        f"the rest; {SEARCH_TOOL} finds text in it"
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
        f"artifact {artifact_id}; use {READ_TOOL}{again} if you need it.]"
    )
