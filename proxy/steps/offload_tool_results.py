"""Step: replace oversized tool results by a preview naming the stored original."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class OffloadToolResultsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["offload_tool_results"] = "offload_tool_results"
