"""One `/metrics` text out of several processes' own: what `--workers N` serves on every scrape.

Each worker renders its own registry (`proxy.metrics.Metrics.render`); the merge adds them up
under the same metric names and labels, so a scrape of any worker reads as one process would:

- counters, histograms (buckets, `_sum`, `_count`) and summaries: the sum over workers;
- the `*_created` timestamps prometheus_client writes beside them: the earliest;
- gauges (the count ratios, `ctxproxy_policy_reload_failed`), and the counters named `shared`
  (`proxy.metrics.SHARED_STATE`: tallies every worker reads from the store, the same in all):
  the largest value. They are states, not this worker's tallies: workers on one Redis store
  converge on the same count ratios, and a reload that failed in any worker is worth seeing.

`retired_only` keeps what a worker that has stopped still owes the sums: its counters and
histograms, not its gauges (a stopped worker's state no longer holds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

_SUMMED = frozenset({"counter", "histogram", "summary", "gaugehistogram", "untyped", "unknown"})
_CREATED = "_created"

SampleKey = tuple[str, tuple[tuple[str, str], ...]]


def parse(text: str) -> list[Metric]:
    """The metric families of one exposition (Prometheus text format)."""
    return list(text_string_to_metric_families(text))


def _rule(family: Metric, shared: frozenset[str]) -> Callable[[float, float], float]:
    if family.name.endswith(_CREATED):
        return min
    if family.type in _SUMMED and family.name not in shared:
        return _add
    return max


def _add(a: float, b: float) -> float:
    return a + b


def _key(sample: Sample) -> SampleKey:
    return sample.name, tuple(sorted(sample.labels.items()))


class _Merged:
    """Families in the order first seen, each with its samples in the order first seen."""

    def __init__(self, shared: frozenset[str]) -> None:
        self.shared = shared
        self.families: dict[str, Metric] = {}
        self.values: dict[str, dict[SampleKey, Sample]] = {}

    def add(self, family: Metric) -> None:
        known = self.families.get(family.name)
        if known is None:
            self.families[family.name] = Metric(family.name, family.documentation, family.type)
            self.values[family.name] = {}
        elif known.type != family.type:
            return  # a worker of another version: keep the first kind, never mix them
        combine = _rule(family, self.shared)
        samples = self.values[family.name]
        for sample in family.samples:
            key = _key(sample)
            seen = samples.get(key)
            value = sample.value if seen is None else combine(seen.value, sample.value)
            samples[key] = Sample(sample.name, sample.labels, value)

    def collect(self) -> Iterator[Metric]:
        for name, family in self.families.items():
            family.samples = list(self.values[name].values())
            yield family


class _Families(Collector):
    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def merge(
    expositions: Iterable[Iterable[Metric]], shared: frozenset[str] = frozenset()
) -> list[Metric]:
    """The families of several processes, added up (see the module's docstring)."""
    merged = _Merged(shared)
    for families in expositions:
        for family in families:
            merged.add(family)
    return list(merged.collect())


def retired_only(
    families: Iterable[Metric], shared: frozenset[str] = frozenset()
) -> list[Metric]:
    """What a stopped worker still counts for: its own tallies and their `_created` times."""
    return [
        f
        for f in families
        if (f.type in _SUMMED and f.name not in shared) or f.name.endswith(_CREATED)
    ]


def render(families: Iterable[Metric]) -> bytes:
    """The Prometheus text format of `families`, as `generate_latest` writes one registry."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)
