"""Step: drop the oldest whole turns, archived as one artifact behind one notice message."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class DropTurnsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["drop_turns"] = "drop_turns"
