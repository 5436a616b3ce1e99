"""`server.records` in config.yaml: the request records the proxy keeps per tenant (what each
completion did, read back through `GET /v1/context/requests`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MAX_RECORDS = 1000
DEFAULT_TTL_SECONDS = 24 * 3600


class RecordsSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(
        default=True,
        description="Keep a record of every completion (written after its answer, off the "
        "request's path; a store that fails drops the record, never the request).",
    )
    max_records: Annotated[int, Field(gt=0, le=1_000_000)] = Field(
        default=DEFAULT_MAX_RECORDS,
        description="Records kept per tenant (per credential in passthrough mode); the oldest "
        "go first.",
    )
    ttl_seconds: Annotated[int, Field(gt=0)] = Field(
        default=DEFAULT_TTL_SECONDS, description="How long a record is kept."
    )
    flush_s: Annotated[float, Field(ge=0, le=10)] = Field(
        default=0.1,
        description="Redis: how long the writer waits for more records to share one round trip "
        "(records reach the store that much later; a round trip costs the process far more "
        "CPU than a record in it). The memory store writes at once.",
    )
    max_pending: Annotated[int, Field(gt=0)] = Field(
        default=1000,
        description="Records waiting to be written at most; beyond, new ones are dropped "
        "(counted in ctxproxy_records_dropped_total).",
    )
