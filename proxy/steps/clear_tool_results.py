"""Step: replace older tool results by a short placeholder naming the stored original."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class ClearToolResultsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["clear_tool_results"] = "clear_tool_results"
