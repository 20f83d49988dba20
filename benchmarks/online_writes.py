"""Online writes as a user makes them: concurrent clients adding one memory each over HTTP.

For each server (``mnemoray ui``, the Ray-free API; ``mnemoray serve``, Ray Serve), on a
new store with the packaged model: 1, 8 and 32 writers (``--writers``), each its own user
with its own connection, add ``--adds`` memories one request at a time. Reports the
add latency (p50, p99), memories/s over the whole run, errors, and the commits' shape:
manifest versions per add (below 1: adds shared commits) and the most segments one shard
holds at the end. Beside them, the store's raw commit cost: one pre-embedded memory per
``MemoryStore.add``, in this process, no HTTP and no model.

``--bound-adds`` more adds (8 writers, through ``mnemoray ui``) then show the segment
count per shard staying bounded while the server's background merge runs.

Run: ``.venv/bin/python benchmarks/online_writes.py``; writes
``benchmarks/results/online_writes.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.longconv_bench import commit_info, machine_info  # noqa: E402
from benchmarks.serve_process import REPO, Server, free_port, wait_healthy  # noqa: E402
from mnemoray.memory.records.record import Memory  # noqa: E402
from mnemoray.memory.store.manifest import read_manifest  # noqa: E402
from mnemoray.memory.store.parquet.store import MemoryStore  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "online_writes.json"
APP = "bench"
TOPICS = ("the garden", "a trip to Lisbon", "the new job", "piano lessons", "the dentist")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def new_store(root: Path) -> None:
    """A store with the packaged model's id and one memory (``mnemoray ui`` opens an
    existing store)."""
    from mnemoray.memory.service.service import MemoryService

    service = MemoryService.open(root)
    try:
        service.add_memories([Memory(APP, "seed", "online", "fact", "The store was created.")])
    finally:
        service.close()


class UiServer:
    """``mnemoray ui`` in a child process on a free port."""

    def __init__(self, store: Path, log_path: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed by stop()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mnemoray.cli", "ui", "--store", str(store)]
            + ["--port", str(self.port)],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout_s: float) -> float:
        return wait_healthy(self.proc, self.base, timeout_s, "mnemoray ui", poll_s=0.3)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def writers_run(base: str, writers: int, adds: int, tag: str) -> dict[str, Any]:
    """``writers`` threads, each its own user and connection, adding ``adds`` memories."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(writers)

    def writer(w: int) -> None:
        mine: list[float] = []
        with httpx.Client(base_url=base, timeout=60) as client:
            start.wait()
            for i in range(adds):
                body = {
                    "app_name": APP,
                    "user_id": f"{tag}-w{w}",
                    "memories": [{"text": f"Note {i} from writer {w} about {TOPICS[i % 5]}."}],
                }
                t = time.perf_counter()
                r = client.post("/v1/memories", json=body)
                mine.append(time.perf_counter() - t)
                if r.status_code != 201 or len(r.json().get("memories", [])) != 1:
                    with lock:
                        errors.append(f"{r.status_code} {r.text[:120]}")
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    return {
        "writers": writers,
        "adds": len(latencies),
        "errors": len(errors),
        "first_errors": errors[:3],
        "p50_ms": round(pct(latencies, 0.5) * 1000, 1),
        "p99_ms": round(pct(latencies, 0.99) * 1000, 1),
        "memories_per_s": round(len(latencies) / elapsed, 1),
    }


def store_shape(store: Path) -> dict[str, Any]:
    m = read_manifest(store)
    assert m is not None
    counts = [len(s) for s in m.segments]
    return {
        "version": m.version,
        "segments_max_per_shard": max(counts),
        "segments": sum(counts),
        "rows": m.rows,
    }


def server_runs(kind: str, work: Path, writer_counts: list[int], adds: int) -> dict[str, Any]:
    store = work / f"{kind}-store"
    new_store(store)
    log_path = work / f"{kind}.log"
    server: UiServer | Server
    if kind == "ui":
        server = UiServer(store, log_path)
    else:
        server = Server(store, {"server.reload_interval_s": 0.25}, {}, log_path)
    rows = []
    try:
        ready_s = server.wait_ready(300)
        for w in writer_counts:
            before = store_shape(store)
            row = writers_run(server.base, w, adds, f"{kind}{w}")
            after = store_shape(store)
            row["versions_per_add"] = round(
                (after["version"] - before["version"]) / max(row["adds"], 1), 3
            )
            row["segments_max_per_shard"] = after["segments_max_per_shard"]
            rows.append(row)
            print(
                f"{kind:>5} {w:>3} writers: p50 {row['p50_ms']:>7.1f} ms  p99 "
                f"{row['p99_ms']:>7.1f} ms  {row['memories_per_s']:>6.1f} mem/s  "
                f"{row['versions_per_add']:.2f} versions/add  errors {row['errors']}",
                flush=True,
            )
    finally:
        server.stop()
    return {"ready_s": round(ready_s, 1), "runs": rows, "store": store_shape(store)}


def bounded_segments(work: Path, total: int) -> dict[str, Any]:
    """``total`` adds by 8 writers through ``mnemoray ui``: the segment count per shard
    sampled as they land, and at the end (the background merge at its defaults)."""
    store = work / "bound-store"
    new_store(store)
    server = UiServer(store, work / "bound.log")
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(1.0):
            samples.append(store_shape(store)["segments_max_per_shard"])

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        server.wait_ready(300)
        sampler.start()
        row = writers_run(server.base, 8, total // 8, "bound")
        time.sleep(3)  # a merge the last writes started
    finally:
        stop.set()
        server.stop()
    shape = store_shape(store)
    return {
        **row,
        "segments_max_per_shard_seen": max(samples, default=0),
        "segments_max_per_shard_end": shape["segments_max_per_shard"],
        "segments_end": shape["segments"],
        "parquet_files_end": sum(1 for _ in (store / "memories").rglob("*.parquet")),
        "rows": shape["rows"],
    }


def raw_commits(work: Path, n: int) -> dict[str, Any]:
    """One pre-embedded memory per ``MemoryStore.add`` (its own commit), no model."""
    import numpy as np

    store = MemoryStore(work / "raw-store")
    rng = np.random.default_rng(0)
    times = []
    for i in range(n):
        vec = rng.standard_normal(384).astype(np.float32)
        vec /= np.linalg.norm(vec)
        mem = Memory(APP, f"raw{i % 8}", "online", "fact", f"raw note {i}", embedding=vec)
        t = time.perf_counter()
        store.add([mem], embedding_model="raw-bench")
        times.append(time.perf_counter() - t)
    return {
        "commits": n,
        "p50_ms": round(pct(times, 0.5) * 1000, 1),
        "mean_ms": round(statistics.mean(times) * 1000, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--writers", default="1,8,32", help="writer counts, comma-separated")
    p.add_argument("--adds", type=int, default=40, help="adds per writer")
    p.add_argument("--servers", default="ui,serve", help="ui, serve or both")
    p.add_argument("--bound-adds", type=int, default=10_000, help="0: skip")
    p.add_argument("--raw", type=int, default=200, help="raw commits to time")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    counts = [int(x) for x in args.writers.split(",") if x]
    out: dict[str, Any] = {
        "benchmark": "online_writes",
        "machine": machine_info(),
        "commit": commit_info(),
        "adds_per_writer": args.adds,
    }
    with tempfile.TemporaryDirectory(prefix="online-writes-") as tmp:
        work = Path(tmp)
        out["raw_commit"] = raw_commits(work, args.raw)
        print(f"raw commit (MemoryStore.add, 1 memory): p50 {out['raw_commit']['p50_ms']} ms")
        for kind in [s for s in args.servers.split(",") if s]:
            out[kind] = server_runs(kind, work, counts, args.adds)
        if args.bound_adds:
            out["bounded"] = bounded_segments(work, args.bound_adds)
            b = out["bounded"]
            print(
                f"{b['adds']} adds by 8 writers: {b['memories_per_s']} mem/s, most segments "
                f"in one shard {b['segments_max_per_shard_seen']} (end "
                f"{b['segments_max_per_shard_end']}), {b['parquet_files_end']} Parquet files"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
