"""`read_context_artifact`: one page of a stored artifact, from a character offset.

Its budget rule: a page keeps its first characters and says where to read on (`next_offset`).
"""

from __future__ import annotations

from typing import Any

from proxy.artifacts.store import Artifact
from proxy.synthetic.arguments import int_arg, str_arg
from proxy.synthetic.base import UNTRUSTED, CallContext, SyntheticTool, ToolResult, ToolSpec
from proxy.synthetic.stored import artifact_id_schema, stored_artifact

READ_TOOL = "read_context_artifact"
HARD_MAX_PAGE_CHARS = 20_000


def page_cap(max_page_chars: int) -> int:
    """The effective page size: the policy's cap, never above the hard cap of 20,000 chars."""
    return max(1, min(max_page_chars, HARD_MAX_PAGE_CHARS))


class ReadArtifact(SyntheticTool):
    name = READ_TOOL

    def spec(self, max_page_chars: int) -> ToolSpec:
        cap = page_cap(max_page_chars)
        return ToolSpec(
            name=READ_TOOL,
            description="Read content removed from this conversation to save space, from a "
            f"character offset; continue at next_offset. {UNTRUSTED}",
            parameters={
                "type": "object",
                "properties": {
                    "artifact_id": artifact_id_schema(),
                    "offset": {"type": "integer", "minimum": 0, "default": 0},
                    "max_chars": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": cap,
                        "default": cap,
                    },
                },
                "required": ["artifact_id"],
                "additionalProperties": False,
            },
        )

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        artifact_id = str_arg(args, "artifact_id")
        cap = page_cap(call.max_page_chars)
        offset = int_arg(args, "offset", 0, minimum=0)
        max_chars = min(int_arg(args, "max_chars", cap, minimum=1), cap)
        artifact = await stored_artifact(self, call, artifact_id)
        if isinstance(artifact, ToolResult):
            return artifact
        return self.found(read_result(artifact, offset, max_chars))

    def result_chars(self, payload: dict[str, Any]) -> int:
        content = payload.get("content")
        return len(content) if isinstance(content, str) else 0

    def shortened(self, payload: dict[str, Any], max_chars: int) -> dict[str, Any]:
        content = payload["content"][:max_chars]
        offset = payload.get("offset")
        start = offset if isinstance(offset, int) else 0
        end = start + len(content)
        return {**payload, "content": content, "next_offset": end, "truncated": True}


def read_result(artifact: Artifact, offset: int, max_chars: int) -> dict[str, Any]:
    """One page of `artifact` from `offset` (characters); `next_offset` is null at the end."""
    total = len(artifact.content)
    page = artifact.content[offset : offset + max_chars]
    end = min(offset, total) + len(page)
    next_offset = end if end < total else None
    return {
        "artifact_id": artifact.id,
        "offset": offset,
        "content": page,
        "next_offset": next_offset,
        "total_chars": total,
        "truncated": next_offset is not None,
        "untrusted_content": True,
    }
