"""``/metrics`` under Ray Serve adds up every ingress replica, whichever one answers."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.ray, pytest.mark.slow]

APP_NAME = "mnemoray-metrics-test"
KEY = "test-key-metrics-mmmmmmmmmmmmmm"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(c: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = c.get("/metrics")
    assert r.status_code == 200, r.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(r.text)
        for s in fam.samples
    }


def test_a_counter_sums_the_requests_of_both_replicas(ray_cluster, tmp_path) -> None:
    from ray import serve
    from ray.serve.context import _get_global_client

    from mnemoray.serve.app import build_app

    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({KEY: "app"}))
    serve.start(http_options={"host": "127.0.0.1", "port": _free_port()})
    port = _get_global_client().http_config.port
    serve.run(
        build_app(
            {
                "store": str(tmp_path / "store"),
                "models": {
                    "embedder": "none",
                    "summarizer": "extractive",
                    "summarizer_deployment": False,
                },
                # Through the proxy, which spreads the requests of one
                # connection over both replicas.
                "server": {
                    "api_keys": str(keys),
                    "replicas": 2,
                    "ingress": "proxy",
                    "num_cpus": {"ingress": 0.1},
                },
            }
        ),
        name=APP_NAME,
        route_prefix="/",
    )
    healthz = (
        "mnemoray_http_requests_total",
        (("method", "GET"), ("route", "/healthz"), ("status", "200")),
    )
    sent = 40
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            timeout=30,
            headers={"Authorization": f"Bearer {KEY}"},
        ) as c:
            for _ in range(sent):
                assert c.get("/healthz").status_code == 200
            # The serving replica's counts are fresh; the other's arrive within a push
            # interval (mnemoray.serve.metrics_hub.PUSH_INTERVAL_S).
            deadline = time.monotonic() + 30
            while True:
                out = _scrape(c)
                if out.get(healthz) == sent or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
    finally:
        serve.delete(APP_NAME)
    assert out.get(healthz) == sent
    assert out[("mnemoray_metrics_replicas", ())] == 2.0
    replicas = {
        dict(labels)["replica"] for name, labels in out if name == "mnemoray_store_readable"
    }
    assert len(replicas) == 2  # a gauge: one series per replica
