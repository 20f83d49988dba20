"""The app's metrics hub: one small named Ray actor that every ingress replica pushes to.

Why not Ray Serve's own metrics API (``ray.serve.metrics``): it exports through each
node's Ray metrics agent, on another port, as one series per replica that Prometheus
must then sum itself; the app's ``/metrics`` would still answer one replica. Here each
replica pushes a snapshot of its registry (``mnemoray.serve.metrics_merge.snapshot``) every
``PUSH_INTERVAL_S`` seconds, and the replica that serves a scrape pushes its own fresh
one first, then merges all of them (``mnemoray.serve.metrics_merge.merge``). So a scrape sees
the serving replica's requests at once and the others' at most one interval late.

The hub is a detached actor named per Serve application, with no CPU reserved: it only
stores the latest snapshot of each replica. Detached, so it outlives the replica that
happened to create it (otherwise the app's counters would reset when that one
restarts); a redeploy of the app keeps adding to the same counters.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any

from prometheus_client import CollectorRegistry

from mnemoray.errors import Unavailable
from mnemoray.periodic import Periodic
from mnemoray.serve.metrics_merge import Snapshot, merge, snapshot

log = logging.getLogger("ray.serve")

HUB_NAMESPACE = "serve"
PUSH_INTERVAL_S = 5.0
GAUGE_TTL_S = 60.0  # a replica silent this long: its gauges leave the answer
CALL_TIMEOUT_S = 10.0


class _Hub:
    """The actor: the latest snapshot of each replica, by replica id."""

    def __init__(self) -> None:
        self._snaps: dict[str, Snapshot] = {}

    def push(self, snap: Snapshot) -> None:
        self._snaps[snap.replica] = snap

    def snapshots(self) -> list[Snapshot]:
        return list(self._snaps.values())


def hub_name(app_name: str) -> str:
    return f"mnemoray-metrics:{app_name}"


class MetricsHub:
    """A replica's side: pushes its registry in a daemon thread; renders the merged view."""

    def __init__(
        self,
        registry: CollectorRegistry,
        app_name: str,
        replica: str,
        interval_s: float = PUSH_INTERVAL_S,
    ) -> None:
        self.registry = registry
        self.app_name = app_name
        self.replica = replica
        self.interval_s = interval_s
        self._actor: Any = None
        self._failed = False  # the last push failed: look the hub up afresh
        self._pusher = Periodic(self._push, interval_s, "mnemoray-metrics-push").start()

    def _hub(self, fresh: bool = False) -> Any:
        import ray

        if self._actor is None or fresh:
            # get_if_exists: every replica names the same actor; the first creates it.
            self._actor = (
                ray.remote(_Hub)
                .options(
                    name=hub_name(self.app_name),
                    namespace=HUB_NAMESPACE,
                    get_if_exists=True,
                    lifetime="detached",
                    num_cpus=0,
                )
                .remote()
            )
        return self._actor

    def _snapshot(self) -> Snapshot:
        return snapshot(self.registry, self.replica, time.time())

    def _push(self) -> None:
        import ray

        try:
            ray.get(
                self._hub(fresh=self._failed).push.remote(self._snapshot()), timeout=CALL_TIMEOUT_S
            )
            self._failed = False
        except Exception as exc:  # noqa: BLE001 - a lost push is retried next interval
            if not self._failed:
                log.warning("metrics push to %s failed: %s", hub_name(self.app_name), exc)
            self._failed = True

    async def render(self) -> bytes:
        """The app's merged exposition, the serving replica's own counters fresh."""
        for attempt in (0, 1):  # a dead hub is created anew once, then it is an error
            try:
                hub = self._hub(fresh=attempt == 1)
                await asyncio.wait_for(hub.push.remote(self._snapshot()), CALL_TIMEOUT_S)
                snaps = await asyncio.wait_for(hub.snapshots.remote(), CALL_TIMEOUT_S)
                return merge(snaps, time.time(), GAUGE_TTL_S)
            except Exception as exc:  # noqa: BLE001 - any Ray failure: retry, then 503
                error = exc
        raise Unavailable(f"metrics hub {hub_name(self.app_name)}: {error}")

    def stop(self) -> None:
        self._pusher.stop()


def attach_hub(registry: CollectorRegistry) -> MetricsHub | None:
    """A hub for ``registry`` inside a Serve replica; ``None`` elsewhere (tests, scripts)."""
    if "ray.serve" not in sys.modules:  # a replica has imported it; elsewhere, don't pay
        return None
    from ray import serve
    from ray.serve.exceptions import RayServeException

    try:
        ctx = serve.get_replica_context()
    except RayServeException:
        return None
    return MetricsHub(registry, ctx.app_name, ctx.replica_tag)
