"""Several workers' `/metrics` added up into what one process would show."""

from __future__ import annotations

from proxy.metrics import Metrics
from proxy.stats import RequestStats
from proxy.workers.merge import merge, parse, render, retired_only


def _worker(requests: int, seconds: float, reload_failed: bool = False) -> Metrics:
    metrics = Metrics()
    for _ in range(requests):
        stats = RequestStats()
        stats.tenant, stats.policy = "acme", "default"
        metrics.record_request("/v1/chat/completions", 200, stats)
        metrics.request_seconds.labels("/healthz").observe(seconds)
    metrics.watch_policies(lambda: reload_failed)
    return metrics


def _value(text: str, sample: str) -> float:
    [line] = [x for x in text.splitlines() if x.startswith(sample + " ") or x.startswith(sample)]
    return float(line.rsplit(" ", 1)[1])


def test_one_worker_renders_byte_for_byte_as_its_own_registry() -> None:
    metrics = _worker(3, 0.2)
    metrics.record_endpoint_read("found")
    metrics.watch_store(lambda: 3)
    own = metrics.render()
    assert render(merge([parse(own.decode())])) == own


def test_counters_and_histograms_are_summed_under_the_same_names() -> None:
    a, b = _worker(2, 0.002).render().decode(), _worker(5, 20.0).render().decode()
    text = render(merge([parse(a), parse(b)])).decode()
    requests = 'ctxproxy_requests_total{policy="default",route="/v1/chat/completions",'
    assert _value(text, requests + 'status="200",tenant="acme"}') == 7
    bucket = 'ctxproxy_request_duration_seconds_bucket{le="0.0025",route="/healthz"}'
    assert _value(text, bucket) == 2  # only a's observations are that fast
    inf = 'ctxproxy_request_duration_seconds_bucket{le="+Inf",route="/healthz"}'
    assert _value(text, inf) == 7
    assert _value(text, 'ctxproxy_request_duration_seconds_sum{route="/healthz"}') == (
        2 * 0.002 + 5 * 20.0
    )
    assert text.count("# TYPE ctxproxy_requests_total counter") == 1


def test_gauges_take_the_largest_and_created_times_the_earliest() -> None:
    early = _worker(1, 0.1).render().decode()
    late = _worker(1, 0.1, reload_failed=True).render().decode()
    text = render(merge([parse(early), parse(late)])).decode()
    assert _value(text, "ctxproxy_policy_reload_failed") == 1
    created = 'ctxproxy_request_duration_seconds_created{route="/healthz"}'
    assert _value(text, created) == _value(early, created) < _value(late, created)


def test_a_retired_worker_keeps_its_tallies_not_its_states() -> None:
    families = retired_only(parse(_worker(4, 0.1, reload_failed=True).render().decode()))
    text = render(families).decode()
    assert "ctxproxy_policy_reload_failed" not in text
    assert "ctxproxy_count_ratio " not in text
    assert 'ctxproxy_request_duration_seconds_count{route="/healthz"} 4.0' in text
    assert "ctxproxy_request_duration_seconds_created" in text


def test_a_family_of_another_kind_is_not_mixed_in() -> None:
    counter = "# TYPE x_total counter\nx_total 2.0\n"
    gauge = "# TYPE x gauge\nx 5.0\n"
    text = render(merge([parse(counter), parse(gauge)])).decode()
    assert "x_total 2.0" in text and "x 5.0" not in text


def test_a_counter_of_state_shared_through_the_store_is_not_summed() -> None:
    shared = frozenset({"ctxproxy_count_ratio_samples"})
    one = "# TYPE ctxproxy_count_ratio_samples_total counter\n"
    a = one + 'ctxproxy_count_ratio_samples_total{model="m",upstream="u"} 40.0\n'
    b = one + 'ctxproxy_count_ratio_samples_total{model="m",upstream="u"} 42.0\n'
    text = render(merge([parse(a), parse(b)], shared)).decode()
    assert 'ctxproxy_count_ratio_samples_total{model="m",upstream="u"} 42.0' in text
    assert "samples" not in render(retired_only(parse(a), shared)).decode()
    summed = render(merge([parse(a), parse(b)])).decode()
    assert 'ctxproxy_count_ratio_samples_total{model="m",upstream="u"} 82.0' in summed
