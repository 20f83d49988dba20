"""Merging replicas' Prometheus registries into one exposition (no Ray)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from mnemoray.http.metrics import Metrics
from mnemoray.serve.metrics_merge import merge, snapshot


def _samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text.decode())
        for s in fam.samples
    }


def _replicas() -> tuple[Metrics, Metrics]:
    a = Metrics(lambda: {"rows": 3, "version": 2, "reloads": 1})
    b = Metrics(lambda: {"rows": 5, "version": 3, "reloads": 4})
    for _ in range(3):
        a.observe("/v1/recall", "POST", 200, 0.004)
    a.observe("/v1/recall", "POST", 404, 0.2)
    for _ in range(2):
        b.observe("/v1/recall", "POST", 200, 0.04)
    b.embed_batch.observe(3)
    return a, b


def test_counters_histograms_sum_and_gauges_are_per_replica() -> None:
    a, b = _replicas()
    out = _samples(
        merge([snapshot(a.registry, "r-a", 100.0), snapshot(b.registry, "r-b", 100.0)], now=101.0)
    )
    ok = (
        "mnemoray_http_requests_total",
        (("method", "POST"), ("route", "/v1/recall"), ("status", "200")),
    )
    assert out[ok] == 5.0
    assert (
        out[
            (
                "mnemoray_http_requests_total",
                (("method", "POST"), ("route", "/v1/recall"), ("status", "404")),
            )
        ]
        == 1.0
    )
    labels = (("method", "POST"), ("route", "/v1/recall"))
    assert out[("mnemoray_http_request_duration_seconds_count", labels)] == 6.0
    assert (
        abs(
            out[("mnemoray_http_request_duration_seconds_sum", labels)]
            - (3 * 0.004 + 0.2 + 2 * 0.04)
        )
        < 1e-9
    )
    # Buckets are cumulative per replica, so their sums stay cumulative.
    assert out[("mnemoray_http_request_duration_seconds_bucket", (("le", "0.005"), *labels))] == 3.0
    assert out[("mnemoray_http_request_duration_seconds_bucket", (("le", "0.05"), *labels))] == 5.0
    assert out[("mnemoray_http_request_duration_seconds_bucket", (("le", "+Inf"), *labels))] == 6.0
    assert out[("mnemoray_query_embed_batch_size_count", ())] == 1.0
    assert out[("mnemoray_index_reloads_total", ())] == 5.0
    # Gauges: one series per replica; nothing summed into a meaningless total.
    assert out[("mnemoray_index_rows", (("replica", "r-a"),))] == 3.0
    assert out[("mnemoray_index_rows", (("replica", "r-b"),))] == 5.0
    assert ("mnemoray_index_rows", ()) not in out
    assert out[("mnemoray_metrics_replicas", ())] == 2.0
    assert not any(name.endswith("_created") for name, _ in out)


def test_a_silent_replica_keeps_its_counters_but_not_its_gauges() -> None:
    a, b = _replicas()
    out = _samples(
        merge(
            [snapshot(a.registry, "r-a", 100.0), snapshot(b.registry, "r-b", 10.0)],
            now=101.0,
            gauge_ttl_s=60.0,
        )
    )
    # Counters never fall when a replica goes away (Prometheus would read a reset).
    assert (
        out[
            (
                "mnemoray_http_requests_total",
                (("method", "POST"), ("route", "/v1/recall"), ("status", "200")),
            )
        ]
        == 5.0
    )
    assert out[("mnemoray_index_rows", (("replica", "r-a"),))] == 3.0
    assert ("mnemoray_index_rows", (("replica", "r-b"),)) not in out
    assert out[("mnemoray_metrics_replicas", ())] == 1.0


def test_one_replica_merges_to_its_own_values() -> None:
    a, _ = _replicas()
    merged = _samples(merge([snapshot(a.registry, "r-a", 5.0)], now=5.0))
    own = _samples(a.render())
    for key, value in own.items():
        name, labels = key
        if name.endswith("_created"):
            continue
        if (name, labels) in merged:
            assert merged[key] == value
        else:  # a gauge: the same value under the replica label
            assert merged[(name, tuple(sorted((*labels, ("replica", "r-a")))))] == value
