"""`upstreams[].prompt_cache` in config.yaml: how long the upstream's provider keeps a prompt
prefix cached after it was last sent (`engine.cache_warmth` judges a conversation's cache warm
or cold by it).

The default is what the providers document for their automatic or default caches: Anthropic
keeps a `cache_control` prefix 5 minutes from its last use (1 hour for a mark with `"ttl": "1h"`,
which the request itself says: its format reports it), OpenAI clears a cached prefix after 5 to
10 minutes of inactivity (the lower bound is taken); other providers reached through litellm
document nothing longer, so 5 minutes too.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TTL_SECONDS = 300
MAX_TTL_SECONDS = 7 * 24 * 3600

Ttl = Annotated[int, Field(ge=0, le=MAX_TTL_SECONDS)] | None


class PromptCacheSettings(BaseModel):
    """The prompt-cache lifetime of one upstream, with per-model overrides."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttl_seconds: Ttl = Field(
        default=DEFAULT_TTL_SECONDS,
        description="Seconds a sent prompt stays cached at the provider (from its last use). "
        "0: the upstream caches nothing (every request is cold: a due cut goes to the target); "
        "null: unknown (never judged cold: cuts always keep the prefix, as without this key).",
    )
    models: dict[str, Ttl] = Field(
        default_factory=dict,
        description="Glob on the request's model (case-insensitive) -> its ttl_seconds (0 and "
        "null as above); the first matching glob wins, else ttl_seconds.",
    )

    def ttl_for(self, model: str) -> int | None:
        """The lifetime configured for `model` (None: unknown)."""
        lowered = model.lower()
        for glob, ttl in self.models.items():
            if fnmatchcase(lowered, glob.lower()):
                return ttl
        return self.ttl_seconds
