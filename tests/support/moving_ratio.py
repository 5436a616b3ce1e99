"""A count ratio that moves between requests, as calibration moves it after every answer, and a
conversation replayed request by request under it (the stable-cuts tests)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from proxy.engine.manifest import Prepared
from proxy.engine.prepare_request import Requester
from proxy.errors import ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.jsonio import dumps
from proxy.tokens.calibration_rule import AppliedRatio, CalibrationKey, RatioSource
from proxy.tokens.counters import TokenCounter

JITTER = (1.0, 1.1, 0.95, 1.05, 0.9, 1.08, 0.97, 1.02)


class Prepares(Protocol):
    """A `Preparer`, or anything that prepares like one (replicas taking turns)."""

    async def prepare(
        self, body: dict[str, Any], raw: bytes, tenant: Any, wire: Any
    ) -> Prepared: ...


@dataclass
class MovingRatio:
    """A `RatioReader` whose ratio the test sets before each request."""

    value: float = 1.0

    def applied(self, key: CalibrationKey, contributor: str) -> AppliedRatio:
        source = RatioSource.none if self.value == 1.0 else RatioSource.own
        return AppliedRatio(self.value, source)


def requests_of(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The requests of a conversation growing answer by answer: its history before each
    assistant message, and the whole of it."""
    cuts = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0]
    return [messages[:i] for i in cuts] + [messages]


def extension(previous: dict[str, Any], sent_before: int, items: list[Any]) -> dict[str, Any]:
    """The previous prepared body with the items this request added appended."""
    return {**previous, "messages": [*previous["messages"], *items[sent_before:]]}


@dataclass
class Step:
    """One request of a replay and what became of it."""

    items: list[dict[str, Any]]
    ratio: float
    body: dict[str, Any] | None
    """The prepared body (None: refused)."""
    manifest: Any = None
    fits: bool = False
    """The previous prepared body with this request's new items fits: under its trigger, and
    under its refusal limit."""


async def replay(
    preparer: Prepares,
    ratio: MovingRatio,
    tenant: Requester,
    requests: list[list[dict[str, Any]]],
    ratios: tuple[float, ...],
    counter: TokenCounter,
    model: str = "gpt-4o",
    extra: Callable[[int], dict[str, Any]] | None = None,
) -> list[Step]:
    """Every request in turn, each under the next ratio of `ratios` (cycled); `extra(n)`: more
    fields of the n-th request's body (tools, output limit)."""
    out: list[Step] = []
    previous: Step | None = None
    for n, items in enumerate(requests):
        ratio.value = ratios[n % len(ratios)]
        body = {"model": model, "messages": items, **(extra(n) if extra else {})}
        try:
            prepared = await preparer.prepare(body, dumps(body), tenant, OPENAI_CHAT)
        except ProxyError:  # refused
            out.append(Step(items, ratio.value, None))
            previous = None
            continue
        step = Step(items, ratio.value, prepared.parsed, prepared.manifest)
        if previous is not None and previous.body is not None:
            grown = extension(previous.body, len(previous.items), items)
            manifest = prepared.manifest  # a prompt over the refusal limit does not fit either
            fitting = min(manifest.trigger, manifest.refusal_limit)
            step.fits = counter.count_request(grown) <= fitting
        out.append(step)
        previous = step
    return out


def kept_prefix(previous: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether `current` starts with `previous`: the same tools, its messages first."""
    old, new = previous["messages"], current["messages"]
    return previous.get("tools") == current.get("tools") and new[: len(old)] == old
