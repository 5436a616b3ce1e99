"""What one request did: tenant, manifest, upstream timings, synthetic rounds.

The edge middleware creates one `RequestStats` per request and reads it back when the response is
done; whoever knows a fact fills it in. It feeds the request metrics and the access log line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from proxy.engine.manifest import Manifest
from proxy.errors import RefusalReason
from proxy.tokens.prices import Cost, ModelPrices, request_cost
from proxy.tokens.usage import TokenUsage, total_usage

NO_LABEL = "-"


@dataclass
class UpstreamCall:
    upstream: str
    seconds: float
    """From sending the request to its response headers."""


@dataclass(frozen=True, slots=True)
class SyntheticCall:
    """One call the proxy executed in a synthetic round (for the request's record)."""

    round: int
    tool: str
    arguments: object
    """As the model sent them (JSON text or an object)."""
    result_chars: int


@dataclass(frozen=True, slots=True)
class RecordedBodies:
    """The bodies a request's record keeps (its policy opts in: `records.bodies`)."""

    original: bytes
    prepared: bytes
    max_bytes: int


@dataclass(frozen=True, slots=True)
class Pricing:
    """What the request's answers are priced at (set by the driver once it is prepared)."""

    upstream: str
    model: str
    """The request's model (a metric label, bounded there)."""
    prices: ModelPrices | None
    """None: no price is known for the model (its cost is unknown, never guessed)."""


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
    synthetic_calls: list[SyntheticCall] = field(default_factory=list)
    scope: str | None = None
    """The request's artifact scope (its session's included), once its body is read."""
    model: str | None = None
    stream: bool = False
    bodies: RecordedBodies | None = None
    answers: list[TokenUsage] = field(default_factory=list)
    """The usage of each upstream answer that stated one, in order (the synthetic rounds one
    each; streams as their bytes passed)."""
    pricing: Pricing | None = None
    error: str | None = None
    """The code of the proxy's own error answer (`context_length_exceeded`, ...), if it was one."""
    reason: RefusalReason | None = None
    """Why the request was refused (the error's `reason` detail), when it says."""
    error_details: dict[str, object] | None = None
    """The proxy's own error answer's details (a refusal's figures)."""
    _cost_of: tuple[int, Pricing | None, Manifest | None, Cost | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """`cost()` as last computed, for the answers, pricing and manifest it was computed from
    (the headers, the metrics and the access line each ask for it)."""

    def upstream_started(self) -> float:
        now = time.perf_counter()
        if self.upstream_sent is None:
            self.upstream_sent = now
        return now

    def upstream_answered(self, upstream: str, sent: float) -> None:
        self.upstream_calls.append(UpstreamCall(upstream, time.perf_counter() - sent))

    @property
    def usage(self) -> TokenUsage | None:
        """The answers' usage summed (None: no answer stated one)."""
        return total_usage(self.answers)

    @property
    def cached_tokens(self) -> int | None:
        """Prompt tokens the upstream read from its cache, summed over the answers (None: no
        answer said)."""
        usage = self.usage
        return None if usage is None else usage.cache_read

    def cost(self) -> Cost | None:
        """The answers' price and the request's unchanged (None: no usage, or not priced)."""
        if self.pricing is None or not self.answers:
            return None
        memo = self._cost_of
        if memo is not None:
            answers, pricing, manifest, cost = memo  # the same objects: compared by identity
            if (answers, pricing, manifest) == (len(self.answers), self.pricing, self.manifest):
                return cost
        marks = self.manifest.cache_marks if self.manifest is not None else None
        uncacheable = bool(marks and marks["placed"])  # placed only where the client put none
        cost = request_cost(self.answers, self.pricing.prices, self.removed_tokens(), uncacheable)
        self._cost_of = (len(self.answers), self.pricing, self.manifest, cost)
        return cost

    def removed_tokens(self) -> int:
        """The upstream tokens preparation took out of the prompt (negative: added), from the
        manifest's counts and count ratio."""
        manifest = self.manifest
        if manifest is None or not manifest.counting_method:
            return 0
        removed = manifest.tokens_before - manifest.tokens_after
        return round(removed * manifest.count_ratio)

    @property
    def overhead_seconds(self) -> float | None:
        """The proxy's own latency before the upstream call (reading, auth, preparation)."""
        return None if self.upstream_sent is None else self.upstream_sent - self.started

    @property
    def upstream_seconds(self) -> float | None:
        if not self.upstream_calls:
            return None
        return sum(call.seconds for call in self.upstream_calls)
