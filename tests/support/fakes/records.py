"""What the fake upstream received."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict


@dataclass(frozen=True)
class Recorded:
    """One request exactly as it arrived (recorded before any reply is produced)."""

    method: str
    path: str
    query: str
    headers: CIMultiDict[str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (raises ValueError when it is not JSON)."""
        return json.loads(self.body)

    @property
    def is_stream(self) -> bool:
        """True when the body is a JSON object with `"stream": true`."""
        try:
            body = self.json()
        except ValueError:
            return False
        return isinstance(body, dict) and body.get("stream") is True

    def include_usage(self) -> bool:
        """True when the body asks for a usage chunk (`stream_options.include_usage`)."""
        try:
            body = self.json()
        except ValueError:
            return False
        options = body.get("stream_options") if isinstance(body, dict) else None
        return isinstance(options, dict) and options.get("include_usage") is True

    def model(self, default: str) -> str:
        """The requested model, or `default` when the body names none."""
        try:
            body = self.json()
        except ValueError:
            return default
        model = body.get("model") if isinstance(body, dict) else None
        return model if isinstance(model, str) and model else default
