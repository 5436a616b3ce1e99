"""What one request did: tenant, manifest, upstream timings, synthetic rounds.

The edge middleware creates one `RequestStats` per request and reads it back when the response is
done; whoever knows a fact fills it in. It feeds the request metrics and the access log line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from proxy.engine.manifest import Manifest
from proxy.errors import RefusalReason

NO_LABEL = "-"


@dataclass
class UpstreamCall:
    upstream: str
    seconds: float
    """From sending the request to its response headers."""


@dataclass
class RequestStats:
    """What one request did; filled in by whoever knows, read by the middleware at the end."""

    started: float = field(default_factory=time.perf_counter)
    tenant: str = NO_LABEL
    policy: str = NO_LABEL
    manifest: Manifest | None = None
    upstream_sent: float | None = None
    """perf_counter() when the first upstream request was sent."""
    upstream_calls: list[UpstreamCall] = field(default_factory=list)
    synthetic_rounds: int = 0
    artifact_reads: int = 0
    cached_tokens: int | None = None
    """Prompt tokens the upstream read from its cache, as its usage reported them (whole JSON
    answers: summed over the rounds)."""
    error: str | None = None
    """The code of the proxy's own error answer (`context_length_exceeded`, ...), if it was one."""
    reason: RefusalReason | None = None
    """Why the request was refused (the error's `reason` detail), when it says."""

    def upstream_started(self) -> float:
        now = time.perf_counter()
        if self.upstream_sent is None:
            self.upstream_sent = now
        return now

    def upstream_answered(self, upstream: str, sent: float) -> None:
        self.upstream_calls.append(UpstreamCall(upstream, time.perf_counter() - sent))

    @property
    def overhead_seconds(self) -> float | None:
        """The proxy's own latency before the upstream call (reading, auth, preparation)."""
        return None if self.upstream_sent is None else self.upstream_sent - self.started

    @property
    def upstream_seconds(self) -> float | None:
        if not self.upstream_calls:
            return None
        return sum(call.seconds for call in self.upstream_calls)
