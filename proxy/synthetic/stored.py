"""Loading the artifact a call names: the artifact, or the result that says why not (unknown
and foreign ids read the same: not found)."""

from __future__ import annotations

import logging
from typing import Any

from proxy.artifacts.store import Artifact, StoreUnavailable
from proxy.synthetic.base import CallContext, CallStatus, SyntheticTool, ToolResult

_log = logging.getLogger("ctxproxy.read_tool")


def artifact_id_schema() -> dict[str, Any]:
    return {
        "type": "string",
        "description": "An art_ id from a truncated result or a removal notice.",
    }


async def stored_artifact(
    tool: SyntheticTool, call: CallContext, artifact_id: str
) -> Artifact | ToolResult:
    try:
        artifact = await call.store.get(call.scope, artifact_id)
    except StoreUnavailable:
        return tool.error(
            CallStatus.artifact_store_unavailable,
            "The artifact store is temporarily unavailable; try again later.",
        )
    except Exception:  # a store bug must not break the request; the model gets a result
        _log.exception("artifact store failed while executing %s", tool.name)
        return tool.error(
            CallStatus.artifact_store_unavailable, "The artifact store failed to answer."
        )
    if artifact is None:
        return tool.error(
            CallStatus.artifact_not_found,
            f"No artifact {artifact_id!r} is available (unknown or expired).",
        )
    return artifact
