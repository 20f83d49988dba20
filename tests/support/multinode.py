"""A multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``: a head and two
worker nodes, each with its own CPU count and custom resource), and what runs on it:

- ``backfill``: the Ray Data backfill, its distill and embed actors spread over the
  nodes, into a store compared with a single-node (in-process) run of the same archive;
- ``node_loss``: a worker node removed while a backfill runs, then a re-run;
- ``serve``: the Serve app with an ingress replica on each of two nodes, a memory added
  after both started, recalled through both.

Run as ``python -m tests.support.multinode WORK_DIR``: it prints one JSON object (the
facts ``tests/pipeline/test_multinode.py`` checks) as its last line. Its own process,
because a test session's Ray (``ray_cluster``) cannot be swapped for another cluster.
"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

NODES = {"head": 1, "node_a": 2, "node_b": 1}  # custom resource -> CPUs of that node
SESSIONS = 16
APP = "multinode"
PARTS = ("backfill", "serve", "node_loss")


def _env() -> None:
    from mnemoray.ray_local import LOOPBACK_RAY_ENV, instance_auth_env

    os.environ.update({**LOOPBACK_RAY_ENV, **instance_auth_env()})
    os.environ.update({"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # A run that cannot go on fails with Ray Data's ExecutionTimeoutError after this long
    # without progress (its default is 30 minutes).
    os.environ["RAY_DATA_EXECUTION_NO_PROGRESS_TIMEOUT_S"] = "60"


def start_cluster() -> tuple[Any, dict[str, Any], dict[str, str]]:
    """The cluster, its worker nodes by resource name, and node id -> resource name."""
    import ray
    from ray.cluster_utils import Cluster

    from mnemoray.ray_local import LOOPBACK

    head_args = {
        "num_cpus": NODES["head"],
        "resources": {"head": 1},
        "node_ip_address": LOOPBACK,
        "include_dashboard": False,
    }
    cluster = Cluster(initialize_head=True, head_node_args=head_args)
    workers = {
        name: cluster.add_node(num_cpus=cpus, resources={name: 1}, node_ip_address=LOOPBACK)
        for name, cpus in NODES.items()
        if name != "head"
    }
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, _node_ip_address=LOOPBACK, log_to_driver=False)
    names = {
        n["NodeID"]: next(r for r in NODES if r in n["Resources"])
        for n in ray.nodes()
        if n["Alive"]
    }
    return cluster, workers, names


def live(store_dir: Path) -> dict[tuple[str, str], list[float] | None]:
    from mnemoray.memory.store.parquet.store import MemoryStore

    out: dict[tuple[str, str], list[float] | None] = {}
    for m in MemoryStore(store_dir).load().iter_memories():
        key = (m.session_id, m.content_hash)
        if key in out:
            raise AssertionError(f"memory stored twice: {key}")
        out[key] = None if m.embedding is None else [float(x) for x in m.embedding]
    return out


def same_store(a: Path, b: Path) -> dict[str, Any]:
    import numpy as np

    ours, theirs = live(a), live(b)
    keys_equal = set(ours) == set(theirs)
    close = keys_equal and all(
        np.allclose(ours[k], theirs[k], atol=1e-5) for k in ours if ours[k] is not None
    )
    return {"memories": len(ours), "reference": len(theirs), "same": keys_equal and close}


def ray_config(archive: Path, store: Path):
    from mnemoray.backfill import BackfillConfig, RayOptions

    return BackfillConfig(
        archive=str(archive),
        store=str(store),
        shards=2,
        commit_every=2,
        progress_interval_s=0.0,
        # Small enough that the pools still fit once a node is gone (their actors restart).
        ray=RayOptions(workers=3, batch_size=1, actor_cpus=0.25, task_cpus=0.25),
    )


def part_backfill(work: Path, names: dict[str, str]) -> dict[str, Any]:
    from mnemoray.backfill import backfill
    from mnemoray.pipeline.backfill import RayDataEngine

    run = backfill(
        ray_config(work / "archive", work / "cluster"), RayDataEngine(), stream=io.StringIO()
    )
    actors = [{**a, "node": names.get(a["node"], a["node"])} for a in run.actors]
    return {
        "memories_written": run.memories_written,
        "actors": actors,
        "store": same_store(work / "cluster", work / "single"),
    }


def part_node_loss(
    work: Path, cluster: Any, workers: dict[str, Any], names: dict[str, str]
) -> dict[str, Any]:
    """``node_b`` is removed once the run committed its first chunk."""
    from mnemoray.backfill import backfill
    from mnemoray.memory.store.manifest import read_manifest
    from mnemoray.pipeline.backfill import RayDataEngine

    store = work / "lost"
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            report = backfill(
                ray_config(work / "archive", store), RayDataEngine(), stream=io.StringIO()
            )
            outcome["first"] = {
                "status": "succeeded",
                "written": report.memories_written,
                "actor_nodes": sorted({names.get(a["node"], "?") for a in report.actors}),
            }
        except Exception as exc:  # noqa: BLE001 - what the test reads
            outcome["first"] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and thread.is_alive():
        m = read_manifest(store) if (store / "manifest.json").exists() else None
        if m is not None and m.ledger_sessions > 0:
            break
        time.sleep(0.2)
    removed_after = (
        read_manifest(store).ledger_sessions if (store / "manifest.json").exists() else 0
    )
    outcome["running_at_removal"] = thread.is_alive()
    cluster.remove_node(workers.pop("node_b"), allow_graceful=False)
    thread.join(300)
    if thread.is_alive():
        outcome["first"] = {"status": "hung"}
        return outcome
    again = backfill(ray_config(work / "archive", store), RayDataEngine(), stream=io.StringIO())
    outcome.update(
        removed_after_sessions=removed_after,
        rerun_written=again.memories_written,
        rerun_skipped=again.skipped,
        store=same_store(store, work / "single"),
    )
    return outcome


def part_serve(work: Path, names: dict[str, str]) -> dict[str, Any]:
    """Two ingress replicas (one per node), a memory added after both started, recalled
    over fresh connections until both replicas have answered (their counters in the
    app's metrics hub)."""
    import httpx
    import ray
    from ray import serve
    from ray._private.state import actors as actor_table

    from mnemoray.serve.app import build_app
    from mnemoray.serve.metrics_hub import HUB_NAMESPACE, hub_name
    from mnemoray.settings.serve import parse_settings

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    settings = parse_settings(
        {
            "store": str(work / "cluster"),
            "server": {"replicas": 2, "port": port, "host": "127.0.0.1"},
            "ingestion": {"sessions_db": str(work / "serve-sessions.db")},
        }
    )
    serve.start(proxy_location="Disabled")
    serve.run(build_app(settings), name="mnemoray", route_prefix="/")
    # The GCS actor table (the state API needs the dashboard, which this cluster lacks).
    replicas = [
        a
        for a in actor_table().values()
        if a.get("State") == "ALIVE" and "MemoryIngress" in (a.get("ActorClassName") or "")
    ]
    nodes = sorted(names.get(a["Address"]["NodeID"], "?") for a in replicas)
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, timeout=60) as client:
        added = client.post(
            "/v1/memories",
            json={
                "app_name": APP,
                "user_id": "ana",
                "memories": [{"text": "Ana's new bicycle is a green Brompton."}],
            },
        )
    # The other replica loads the new manifest within its reload interval (0.25 s by
    # default) of noticing it; give it a few.
    time.sleep(2)
    found = 0
    asked = 0
    answered: dict[str, float] = {}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for _ in range(10):
            # A new connection each time: the kernel spreads them over the port's listeners.
            with httpx.Client(base_url=base, timeout=60) as client:
                r = client.post(
                    "/v1/recall",
                    json={"app_name": APP, "user_id": "ana", "query": "what bicycle", "top_k": 3},
                )
            asked += 1
            texts = [m["text"] for m in r.json().get("memories", [])]
            found += any("Brompton" in t for t in texts)
        try:  # the replicas' first pushes create it
            hub = ray.get_actor(hub_name("mnemoray"), namespace=HUB_NAMESPACE)
        except ValueError:
            time.sleep(1)
            continue
        answered = {
            s.replica: sum(
                v
                for f in s.families
                if f.name == "mnemoray_http_requests"
                for name, labels, v in f.samples
                if name.endswith("_total") and ("route", "/v1/recall") in labels
            )
            for s in ray.get(hub.snapshots.remote())
        }
        if len(answered) >= 2 and all(v > 0 for v in answered.values()):
            break
        time.sleep(1)
    serve.shutdown()
    return {
        "replica_nodes": nodes,
        "added_status": added.status_code,
        "recalls": asked,
        "recalls_with_memory": found,
        "recalls_by_replica": sorted(answered.values()),
    }


def main(work: Path, parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    _env()
    import ray

    from mnemoray.backfill import BackfillConfig, backfill
    from tests.support.archive_gen import make_archive

    make_archive(work / "archive", SESSIONS, files=4, bad=False)
    # The single-node reference: the in-process engine, the same archive and model.
    backfill(
        BackfillConfig(work / "archive", work / "single", shards=2, commit_every=2),
        stream=io.StringIO(),
    )
    cluster, workers, names = start_cluster()
    out: dict[str, Any] = {"nodes": sorted(names.values())}
    try:
        if "backfill" in parts:
            out["backfill"] = part_backfill(work, names)
        if "serve" in parts:
            out["serve"] = part_serve(work, names)
        if "node_loss" in parts:
            out["node_loss"] = part_node_loss(work, cluster, workers, names)
    finally:
        ray.shutdown()
        cluster.shutdown()
    return out


if __name__ == "__main__":
    result = main(Path(sys.argv[1]), tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else PARTS)
    print(json.dumps(result), flush=True)
