"""`prices:` in config.yaml: per-model price overrides (USD per million tokens), tried before
litellm's bundled price map (`proxy.tokens.prices`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

_Price = Annotated[float, Field(ge=0, le=1_000_000)]


class PriceSettings(BaseModel):
    """One override: the first entry whose `model` glob (and `upstream`, when given) matches."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="Glob on the request's model (case-insensitive).")
    upstream: str | None = Field(
        default=None, description="Only for requests routed to this upstream (its name)."
    )
    input_per_mtok: _Price = Field(description="Uncached input, USD per million tokens.")
    output_per_mtok: _Price = Field(description="Output, USD per million tokens.")
    cache_read_per_mtok: _Price | None = Field(
        default=None,
        description="Input read from the provider's prompt cache; omitted: the input price.",
    )
    cache_write_per_mtok: _Price | None = Field(
        default=None,
        description="Input written to the provider's prompt cache; omitted: the input price.",
    )
