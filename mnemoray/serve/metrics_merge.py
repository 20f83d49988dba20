"""One Prometheus exposition for the whole app, merged from every replica's registry.

Each ingress replica keeps its own ``CollectorRegistry`` (``mnemoray.http.metrics``). A replica
takes a :func:`snapshot` of it (plain tuples, cheap to pickle) and pushes it to the
app's metrics hub (``mnemoray.serve.metrics_hub``); ``/metrics`` answers :func:`merge` of all
snapshots, whichever replica serves the scrape. The rules, per metric type:

- counters, histograms (buckets, ``_sum``, ``_count``), summaries: summed over the
  replicas per label set, so ``rate()`` sees the app's traffic. A replica that went
  away keeps its last values in the sum: dropping them would make the counters fall,
  which Prometheus reads as a reset.
- gauges (and any other type): one series per replica, labelled ``replica``: a sum
  of e.g. "manifest version this replica serves" means nothing, and a value of the
  shared jobs.db is reported alike by each. A replica not heard from for
  ``gauge_ttl_s`` drops out (a gauge of a dead replica is not a current value).

``_created`` samples are left out: a summed series has no single creation time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric

REPLICA_LABEL = "replica"
SUMMED_TYPES = frozenset({"counter", "histogram", "summary", "gaugehistogram"})

# (sample name, sorted label pairs, value)
Sample = tuple[str, tuple[tuple[str, str], ...], float]


@dataclass(frozen=True)
class Family:
    """One metric family of one replica, as plain data."""

    name: str
    documentation: str
    type: str
    unit: str
    samples: tuple[Sample, ...]


@dataclass(frozen=True)
class Snapshot:
    """A replica's registry at ``taken_at`` (seconds, the pushing host's clock)."""

    replica: str
    taken_at: float
    families: tuple[Family, ...]


def snapshot(registry: CollectorRegistry, replica: str, taken_at: float) -> Snapshot:
    families = []
    for m in registry.collect():
        samples = tuple(
            (s.name, tuple(sorted(s.labels.items())), float(s.value))
            for s in m.samples
            if not s.name.endswith("_created")
        )
        families.append(Family(m.name, m.documentation, m.type, m.unit, samples))
    return Snapshot(replica, taken_at, tuple(families))


def merged_families(snapshots: Iterable[Snapshot], now: float, gauge_ttl_s: float) -> list[Metric]:
    """The families of all ``snapshots``, merged by the rules above, sorted by name."""
    heads: dict[str, Family] = {}
    sums: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for snap in sorted(snapshots, key=lambda s: s.replica):
        fresh = now - snap.taken_at <= gauge_ttl_s
        for fam in snap.families:
            head = heads.setdefault(fam.name, fam)
            if head.type != fam.type:  # a changed definition mid-rollout: keep the first
                continue
            acc = sums.setdefault(fam.name, {})
            summed = fam.type in SUMMED_TYPES
            if not summed and not fresh:
                continue
            for name, labels, value in fam.samples:
                if summed:
                    key = (name, labels)
                    acc[key] = acc.get(key, 0.0) + value
                else:
                    acc[(name, tuple(sorted(labels + ((REPLICA_LABEL, snap.replica),))))] = value
    out = []
    for fam_name in sorted(heads):
        head = heads[fam_name]
        m = Metric(head.name, head.documentation, head.type, head.unit)
        for (name, labels), value in sums[fam_name].items():
            m.add_sample(name, dict(labels), value)
        if m.samples or head.type in SUMMED_TYPES:
            out.append(m)
    return out


class _Fixed:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def merge(snapshots: Iterable[Snapshot], now: float, gauge_ttl_s: float = 60.0) -> bytes:
    """The text exposition of all ``snapshots`` (the format ``generate_latest`` writes)."""
    snaps = list(snapshots)
    registry = CollectorRegistry(auto_describe=False)
    families = merged_families(snaps, now, gauge_ttl_s)
    replicas = Metric(
        "mnemoray_metrics_replicas",
        "Ingress replicas whose metrics this answer adds up (heard from within the gauge TTL)",
        "gauge",
    )
    replicas.add_sample(
        "mnemoray_metrics_replicas", {}, float(sum(now - s.taken_at <= gauge_ttl_s for s in snaps))
    )
    registry.register(_Fixed([*families, replicas]))
    return generate_latest(registry)
