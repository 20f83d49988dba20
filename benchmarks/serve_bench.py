"""The Ray Serve recall endpoint under load, at 15k, 100k and 1M memories, layer by layer.

For each store size it measures, on one machine:

- ``faiss flat (all)``: a plain ``IndexFlatIP`` over ALL the store's vectors, one
  query at a time (no embedding): what a single unpartitioned index would cost;
- ``embed query``: the query embedder alone (``open_embedder("onnx")``, the model
  the server embeds queries with: ``query_embedder: auto`` -> ONNX fp32);
- ``search (vector given)``: ``Retriever.search_user`` with a ready query vector
  (hybrid: dense + BM25 + entity + recency over the user's rows);
- ``MemoryService.search``: the two above through the public in-process API;
- ``GET /healthz`` and ``POST /v1/recall`` through the real Serve app
  (``mnemoray.serve.app.run_local``, what ``mnemoray serve`` runs: by default the
  ``MemoryIngress`` replica answers HTTP itself; ``--variants proxy``: Ray Serve's HTTP
  proxy in front), started in a subprocess and driven from separate
  load-generator processes (asyncio + aiohttp, keep-alive) with C concurrent
  clients for a fixed number of requests (bounded in time too), 127.0.0.1 only.

Before any server starts it measures the encoder floor (``encoder_floor``): one query's
encode p50 and the cores' one-query encode rate, which the recall goals are counted
against.

Every recall carries a query never sent before (the server caches 4096 query
vectors, a repeated query would skip the embedding), for a random user of the
store. Healthz and recall are measured back to back at each concurrency so a load
change on a shared machine hits both alike. Per run the harness also reads the
CPU time every process of the server tree (Ray's proxy, the replica, ...) and the
load generator spent, from /proc, and the replica's own request-latency and
query-batch histograms from ``/metrics``: CPU ms per request per process shows
where the time goes.

The data (generated, deterministic for a seed)::

    pool   POOL texts from templates (1-3 sentences about people, places, plans),
           embedded ONCE with the ONNX MiniLM (cached .npy)
    memory pool text j (uniform at random) for user u, vector = normalise(
           pool_vec[j] + NOISE * g / sqrt(384)), g ~ N(0, I): cosine ~0.98 to its
           pool vector, so no two memories share a vector while the neighbourhood
           structure of real sentence embeddings is kept. Search cost does not
           depend on the values (per-user search is an exact scan of the user's rows).

Stores are written with ``MemoryStore.write_segment(..., index_kind="flat")`` in
chunks of whole users (~100k rows per call, ~12k rows per shard segment): the
"auto" index would build HNSW graphs above 50k rows per segment, and HNSW builds
of 1M 384-d vectors take far too long on 2 cores; recall never touches them (a
user's recall is an exact scan of the user's contiguous rows). Built stores are
cached under ``benchmarks/.cache/stores/<size>/<key>`` (git-ignored), keyed by
their parameters, so a re-run starts in seconds.

Run: ``.venv/bin/python benchmarks/serve_bench.py`` (100k and 1M; the first run
embeds the pool and builds the stores) or ``--quick`` (100k, fewer requests) ->
table on stdout and ``benchmarks/results/serve.json``. ``--setting group.key=value``
passes a serving setting (``mnemoray.settings.serve``) and ``--server-env KEY=VALUE`` an
environment variable of the server (e.g. ``RAY_SERVE_*``) to try a configuration
(the query encoder's threads: ``--setting models.query_threads=N``; it never
spin-waits in the replica).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # mnemoray.serve when run as a script (imported lazily: the
# load generators must start fast)
from benchmarks.serve_process import Server, http, tree_cpu  # noqa: E402

CACHE = HERE / ".cache"
RESULTS = HERE / "results" / "serve.json"
README = HERE / "README.md"

GENERATOR_VERSION = 1  # bump when generated content changes: part of the cache keys
APP = "bench"
BASE_TS = 1_704_067_200.0  # 2024-01-01T00:00:00Z
DIM = 384
CHUNK_ROWS = 100_000  # memories per write_segment call (whole users)
# users x memories per user; "15k": many users with few memories each (about what 3,000
# distilled sessions give), where the query encoder, not the scan, is most of a recall.
SIZES = {"15k": (100, 150), "100k": (10, 10_000), "1m": (100, 10_000)}
TOP_K = 5

# -- text generation ----------------------------------------------------------------
NAMES = (
    "Maya",
    "Sofia",
    "Amelia",
    "Ingrid",
    "Priya",
    "Chloe",
    "Hannah",
    "Lucia",
    "Nadia",
    "Greta",
    "Yuki",
    "Esme",
    "Rosa",
    "Talia",
    "Leo",
    "Mateo",
    "Jonas",
    "Ravi",
    "Elliot",
    "Tomas",
    "Hugo",
    "Felix",
    "Omar",
    "Kenji",
    "Callum",
    "Dmitri",
    "Arlo",
    "Nico",
    "Bram",
    "Silas",
    "Freya",
    "Imogen",
)
RELATIONS = (
    "sister",
    "brother",
    "coworker",
    "neighbour",
    "cousin",
    "best friend",
    "boss",
    "roommate",
    "dentist",
    "landlord",
    "manager",
    "mother",
    "father",
    "partner",
)
CITIES = (
    "Berlin",
    "Madrid",
    "Lisbon",
    "Paris",
    "Oslo",
    "Vienna",
    "Prague",
    "Kyoto",
    "Toronto",
    "Chicago",
    "Austin",
    "Denver",
    "Seattle",
    "Dublin",
    "Porto",
    "Milan",
    "Zurich",
    "Krakow",
    "Athens",
    "Boston",
    "Lyon",
    "Seville",
    "Bergen",
    "Nairobi",
)
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
THINGS = (
    "flight",
    "hotel",
    "train ticket",
    "dinner reservation",
    "car rental",
    "concert",
    "dentist appointment",
    "budget report",
    "tax return",
    "insurance claim",
    "birthday gift",
    "gym membership",
    "guitar lesson",
    "vet visit",
    "job interview",
    "apartment viewing",
    "lease renewal",
    "marathon training plan",
    "invoice",
    "conference talk",
    "code review",
    "database migration",
    "garden project",
    "piano recital",
    "cooking class",
    "passport renewal",
    "wedding speech",
)
PETS = (
    "parrot",
    "beagle",
    "cockatiel",
    "Maine Coon",
    "border collie",
    "corn snake",
    "guinea pig",
    "golden retriever",
    "leopard gecko",
    "dwarf rabbit",
)
FOODS = ("peanuts", "shellfish", "gluten", "dairy", "sesame", "eggs", "soy", "strawberries")
HOBBIES = (
    "bouldering",
    "sourdough baking",
    "chess",
    "birdwatching",
    "salsa dancing",
    "woodworking",
    "photography",
    "trail running",
    "pottery",
    "sailing",
)
FEELINGS = (
    "stressed about",
    "excited about",
    "worried about",
    "happy with",
    "unsure about",
    "annoyed by",
    "relieved about",
)
SENTENCES = (
    "{name} said the {thing} in {city} has to be sorted out before {month}.",
    "The user's {rel} {name} is visiting {city} in {month} and needs a {thing}.",
    "The user is {feel} the {thing} on {day}.",
    "The user moved to {city} last {month} and is still looking for a good {hobby} club.",
    "The user has a {pet} called {name2} that needs a {thing} soon.",
    "The user is allergic to {food}, so dinner plans with {name} must avoid it.",
    "The user asked to be reminded about the {thing} every {day} until {month}.",
    "{name} recommended {hobby} in {city}; the user wants to try it in {month}.",
    "The user and {name} argued about the {thing}, then agreed to split the cost.",
    "The user's {rel} works in {city} and suggested meeting on {day} for {hobby}.",
    "Booked the {thing} for {day}; confirmation goes to the user's {rel} {name}.",
    "The user prefers window seats and early trains when travelling to {city}.",
    "The user cancelled the {thing} because {name} is ill, and will rebook in {month}.",
    "The user's {pet} {name2} hates the vacuum cleaner and chews cables.",
    "The user has spent about {n} euros on {hobby} gear this year.",
    "The user wants the {thing} summary sent to {name} by {day} at {hour} o'clock.",
)
KINDS = ("fact", "chunk", "session_summary")
KIND_P = (0.5, 0.3, 0.2)
QUERIES = (
    "what did {name} say about the {thing}",
    "when is my {thing} in {city}",
    "who is visiting {city} in {month}",
    "remind me what I decided about the {thing} with {name}",
    "what food am I allergic to when eating with {name}",
    "where did I want to try {hobby}",
    "what is my {pet} called",
    "did I cancel the {thing} in {month}",
    "which day is the {thing} with my {rel}",
    "how much did I spend on {hobby}",
    "{thing} {city} {month} plans",
    "what was I {feel} on {day}",
    "my {rel} {name} and the {thing}",
)


def _fill(template: str, rng: random.Random) -> tuple[str, list[str], list[str]]:
    slots = {
        "name": rng.choice(NAMES),
        "name2": rng.choice(NAMES),
        "rel": rng.choice(RELATIONS),
        "city": rng.choice(CITIES),
        "month": rng.choice(MONTHS),
        "day": rng.choice(DAYS),
        "thing": rng.choice(THINGS),
        "pet": rng.choice(PETS),
        "food": rng.choice(FOODS),
        "hobby": rng.choice(HOBBIES),
        "feel": rng.choice(FEELINGS),
        "n": str(rng.randint(20, 2000)),
        "hour": str(rng.randint(7, 19)),
    }
    text = template.format(**slots)
    entities = [slots[k] for k in ("name", "name2", "city") if "{" + k + "}" in template]
    topics = [slots[k] for k in ("thing", "hobby", "pet") if "{" + k + "}" in template]
    return text, entities, topics


def make_pool(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` unique memory texts (1-3 sentences) with their entities and topics."""
    rng = random.Random(f"pool-{seed}")
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    while len(out) < n:
        parts = [_fill(rng.choice(SENTENCES), rng) for _ in range(rng.choice((1, 1, 2, 2, 3)))]
        text = " ".join(p[0] for p in parts)
        if text in seen:
            continue
        seen.add(text)
        out.append(
            {
                "text": text,
                "entities": sorted({e for p in parts for e in p[1]}),
                "topics": sorted({t for p in parts for t in p[2]}),
            }
        )
    return out


QUERY_TAILS = (
    "",
    "",
    " before {month}",
    " with {name}",
    " in {city}",
    " on {day}",
    " for my {rel}",
    " last {month}",
)


def make_queries(n: int, seed: int) -> list[str]:
    """``n`` unique short queries (4-14 words): every recall embeds a new query."""
    rng = random.Random(f"queries-{seed}")
    seen: set[str] = set()
    out: list[str] = []
    for _ in range(100 * n):
        if len(out) >= n:
            break
        q = _fill(rng.choice(QUERIES) + rng.choice(QUERY_TAILS), rng)[0]
        if q not in seen:
            seen.add(q)
            out.append(q)
    if len(out) < n:
        raise ValueError(f"queries: only {len(out)} unique ones from the templates, {n} wanted")
    return out


def _key(**params: Any) -> str:
    raw = json.dumps({"generator": GENERATOR_VERSION, **params}, sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def load_pool(size: int, seed: int, log: Any) -> tuple[list[dict[str, Any]], np.ndarray, str]:
    """The text pool and its embeddings (ONNX MiniLM), cached under benchmarks/.cache."""
    from mnemoray.embedders import open_embedder

    embedder = open_embedder("onnx")
    assert embedder is not None
    key = _key(kind="pool", size=size, seed=seed, model=embedder.model_id)
    texts_path = CACHE / f"pool-{key}.json"
    vec_path = CACHE / f"pool-{key}.npy"
    pool = make_pool(size, seed)
    if (
        vec_path.is_file()
        and texts_path.is_file()
        and json.loads(texts_path.read_text()) == [p["text"] for p in pool]
    ):
        return pool, np.load(vec_path), embedder.model_id
    log(f"embedding the pool: {size} texts with {embedder.model_id} (ONNX), once ...")
    start = time.perf_counter()
    vecs = np.empty((size, embedder.dim), dtype=np.float32)
    step = 2048
    for i in range(0, size, step):
        vecs[i : i + step] = embedder.encode([p["text"] for p in pool[i : i + step]], batch_size=64)
        log(f"  {min(i + step, size)}/{size} ({time.perf_counter() - start:.0f} s)")
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(vec_path, vecs)
    texts_path.write_text(json.dumps([p["text"] for p in pool]))
    return pool, vecs, embedder.model_id


def build_store(
    label: str,
    users: int,
    per_user: int,
    pool: list[dict[str, Any]],
    pool_vecs: np.ndarray,
    model_id: str,
    noise: float,
    seed: int,
    log: Any,
) -> tuple[Path, dict[str, Any]]:
    """A store of users x per_user memories, cached by its parameters."""
    from mnemoray.memory.records.record import Memory
    from mnemoray.memory.store.parquet.store import MemoryStore

    params = {
        "users": users,
        "per_user": per_user,
        "pool": len(pool),
        "noise": noise,
        "seed": seed,
        "model": model_id,
        "chunk_rows": CHUNK_ROWS,
        "index": "flat",
    }
    root = CACHE / "stores" / label / _key(kind="store", **params)
    done = root / "BUILD.json"
    if done.is_file():
        return root / "store", json.loads(done.read_text())
    if root.exists():
        shutil.rmtree(root)  # a build that did not finish
    log(f"building the {label} store: {users} users x {per_user} memories -> {root}")
    store = MemoryStore(root / "store")
    start = time.perf_counter()
    n_pool = len(pool)
    per_chunk = max(1, CHUNK_ROWS // per_user)
    kinds = np.array(KINDS)
    for u0 in range(0, users, per_chunk):
        memories = []
        for u in range(u0, min(users, u0 + per_chunk)):
            rng = np.random.default_rng([seed, u])
            picks = rng.integers(0, n_pool, per_user)
            vecs = pool_vecs[picks] + (noise / math.sqrt(DIM)) * rng.standard_normal(
                (per_user, DIM), dtype=np.float32
            )
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            kind = kinds[rng.choice(len(KINDS), per_user, p=KIND_P)]
            user = f"u{u:04d}"
            for i in range(per_user):
                p = pool[picks[i]]
                t = BASE_TS + i * 3600.0  # one memory an hour: ~14 months of history
                memories.append(
                    Memory(
                        app_name=APP,
                        user_id=user,
                        session_id=f"s{i // 8:05d}",
                        kind=str(kind[i]),
                        text=p["text"],
                        source_event_ids=(f"e{i:06d}",),
                        topics=tuple(p["topics"]),
                        entities=tuple(p["entities"]),
                        key_facts=(p["text"].split(". ")[0][:120],) if kind[i] == "fact" else (),
                        event_time_start=t,
                        event_time_end=t + 300.0,
                        created_at=t + 600.0,
                        embedding=vecs[i],
                    )
                )
        result = store.write_segment(memories, model_id, DIM, index_kind="flat")
        log(
            f"  users {u0}-{min(users, u0 + per_chunk) - 1}: {result.written} rows, "
            f"version {result.version} ({time.perf_counter() - start:.0f} s)"
        )
    info = {
        "params": params,
        "rows": users * per_user,
        "segments": sum(len(s) for s in store.manifest().segments),
        "shards": store.shards,
        "build_s": round(time.perf_counter() - start, 1),
        "bytes": sum(f.stat().st_size for f in (root / "store").rglob("*") if f.is_file()),
    }
    done.write_text(json.dumps(info, indent=1))
    return root / "store", info


# -- statistics ------------------------------------------------------------------------
def summarize(lat_s: list[float], wall_s: float | None = None) -> dict[str, Any]:
    if not lat_s:
        return {"n": 0}
    a = np.asarray(lat_s) * 1e3
    out = {
        "n": len(a),
        "p50_ms": round(float(np.percentile(a, 50)), 3),
        "p95_ms": round(float(np.percentile(a, 95)), 3),
        "p99_ms": round(float(np.percentile(a, 99)), 3),
        "mean_ms": round(float(a.mean()), 3),
        "max_ms": round(float(a.max()), 3),
    }
    out["rps"] = round(len(a) / wall_s, 1) if wall_s else round(1e3 / float(a.mean()), 1)
    return out


def timed(fn: Any, items: list[Any]) -> dict[str, Any]:
    lat = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        lat.append(time.perf_counter() - t0)
    return summarize(lat)


# -- in-process layers ---------------------------------------------------------------------
def inprocess_layers(
    store_dir: Path, queries: list[str], users: int, n: int, flat_n: int, seed: int, log: Any
) -> list[dict[str, Any]]:
    import faiss

    from mnemoray.embedders import open_embedder
    from mnemoray.memory.service.service import MemoryService
    from mnemoray.memory.store.parquet.store import MemoryStore
    from mnemoray.summarizers import get_summarizer

    rng = random.Random(f"inproc-{seed}")
    embedder = open_embedder("onnx")
    assert embedder is not None
    svc = MemoryService(MemoryStore(store_dir), embedder, get_summarizer("extractive"))
    t0 = time.perf_counter()
    snap = svc.snapshot()
    load_s = time.perf_counter() - t0
    rows = []
    qs = iter(queries)

    def user() -> str:
        return f"u{rng.randrange(users):04d}"

    for q in queries[:20]:  # first-call allocations
        embedder.encode([q])
    # Cold: the first recall of each user builds its candidate set (BM25, entities).
    cold = timed(lambda u: svc.search(APP, u, next(qs), TOP_K), [f"u{u:04d}" for u in range(users)])
    rows.append({"layer": "MemoryService.search, first per user (cold)", **cold})
    emb_q = [next(qs) for _ in range(n)]
    vecs: dict[str, np.ndarray] = {}

    def embed(q: str) -> None:
        vecs[q] = embedder.encode([q])[0]

    rows.append({"layer": "embed query (ONNX, 1 query)", **timed(embed, emb_q)})
    items = [(user(), q) for q in emb_q]
    rows.append(
        {
            "layer": "search, vector given (hybrid, 1 user)",
            **timed(
                lambda it: svc.retriever.search_user(snap, APP, it[0], it[1], vecs[it[1]], TOP_K),
                items,
            ),
        }
    )
    rows.append(
        {
            "layer": "MemoryService.search (embed + search)",
            **timed(
                lambda it: svc.search(APP, it[0], it[1], TOP_K),
                [(user(), next(qs)) for _ in range(n)],
            ),
        }
    )
    # A plain exact index over every memory of every user (what one unpartitioned
    # flat index costs per query).
    index = faiss.IndexFlatIP(DIM)
    for segs in snap.segments:
        for seg in segs:
            index.add(np.ascontiguousarray(seg.vectors))
    total = index.ntotal
    qv = np.stack([vecs[q] for q in emb_q[:flat_n]])
    index.search(qv[:1], TOP_K)
    rows.append(
        {
            "layer": f"faiss IndexFlatIP over all {total:,} (1 query)",
            **timed(lambda i: index.search(qv[i : i + 1], TOP_K), list(range(len(qv)))),
            "faiss_threads": faiss.omp_get_max_threads(),
        }
    )
    log(
        f"  in-process: snapshot load {load_s:.1f} s; "
        + "; ".join(f"{r['layer']}: p50 {r['p50_ms']:.2f} ms" for r in rows)
    )
    return rows


def encoder_floor(queries: list[str], n: int, log: Any) -> dict[str, Any]:
    """What the encoder alone allows, measured here before any server starts:

    - ``one_encode_p50_ms``: one query encoded at a time by the project's embedder as
      opened by default (``open_embedder("default")``: ONNX Runtime, its own threads);
    - ``issue_rate_qps``: the cores' one-query encode rate as the goal counts it,
      cores / that p50;
    - ``parallel_rate_qps``: the same measured: one single-threaded encoder per core,
      each encoding one query at a time, all at once, for 3 s.
    """
    import threading

    from mnemoray.embedders import open_embedder
    from mnemoray.embedders.onnx import OnnxEmbedder

    embedder = open_embedder("default")
    assert embedder is not None
    for q in queries[:20]:
        embedder.encode([q])
    lat = []
    for q in queries[20 : 20 + n]:
        t0 = time.perf_counter()
        embedder.encode([q])
        lat.append(time.perf_counter() - t0)
    cores = os.cpu_count() or 1
    singles = [OnnxEmbedder(threads=1, spin=False) for _ in range(cores)]
    for e in singles:
        e.encode(["warm up"])
    counts = [0] * cores
    stop = time.perf_counter() + 3.0

    def run(k: int) -> None:
        i = k
        while time.perf_counter() < stop:
            singles[k].encode([queries[i % len(queries)]])
            counts[k] += 1
            i += cores

    threads = [threading.Thread(target=run, args=(k,)) for k in range(cores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p50 = float(np.percentile(np.asarray(lat) * 1e3, 50))
    out = {
        "cores": cores,
        "one_encode_p50_ms": round(p50, 3),
        "issue_rate_qps": round(cores * 1e3 / p50, 1),
        "parallel_rate_qps": round(sum(counts) / 3.0, 1),
    }
    log(
        f"encoder floor: one encode p50 {out['one_encode_p50_ms']} ms -> {cores} cores "
        f"{out['issue_rate_qps']} queries/s; measured one at a time on every core: "
        f"{out['parallel_rate_qps']} queries/s"
    )
    return out


# -- the server (benchmarks.serve_process) ------------------------------------------------------
def replica_metrics(server: Server) -> dict[str, float]:
    """The app's counters (its /metrics merges every replica's: metrics_hub), summed
    over the bases if there are several."""
    out: dict[str, float] = {}
    for base in server.base.split(","):
        status, body = http("GET", base + "/metrics")
        if status == 200:
            for k, v in parse_metrics(body.decode()).items():
                out[k] = out.get(k, 0.0) + v
    return out


_METRIC = re.compile(r"^(mnemoray_\w+?)(?:\{([^}]*)\})? ([0-9.eE+-]+|NaN)$")


def parse_metrics(text: str) -> dict[str, float]:
    """The replica's recall latency and query batch histograms: sums and counts."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _METRIC.match(line)
        if not m:
            continue
        name, labels, value = m.groups()
        labels = labels or ""
        if (
            name.startswith("mnemoray_http_request_duration_seconds_")
            and 'route="/v1/recall"' in labels
        ):
            out["recall_" + name.rsplit("_", 1)[1]] = out.get(
                "recall_" + name.rsplit("_", 1)[1], 0.0
            ) + float(value)
        elif name in (
            "mnemoray_query_embed_batch_size_sum",
            "mnemoray_query_embed_batch_size_count",
        ):
            out["batch_" + name.rsplit("_", 1)[1]] = float(value)
    return out


# -- CPU accounting from /proc ---------------------------------------------------------------
def machine_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    idle = vals[3] + vals[4]
    return float(sum(vals) - idle), float(sum(vals))


# -- the load generator (a separate process) --------------------------------------------------
def _loadgen_main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    try:
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    except ImportError:
        pass
    print(json.dumps(asyncio.run(_drive(spec))), flush=True)


async def _drive(spec: dict[str, Any]) -> dict[str, Any]:
    import aiohttp

    # Several bases (comma-separated): client k keeps a connection to bases[k % len], as
    # a load balancer over several servers would.
    urls = [b + spec["path"] for b in spec["bases"]]
    method = spec["method"]
    bodies = [b.encode() for b in spec.get("bodies") or []]
    n = spec["n"]
    conc = spec["concurrency"]
    took_re = re.compile(rb'"took_ms":([0-9.eE+-]+)')
    lat: list[float] = []
    took: list[float] = []
    errors: dict[str, int] = {}
    next_i = 0
    headers = {"content-type": "application/json"}
    timeout = aiohttp.ClientTimeout(total=spec["request_timeout_s"])
    connector = aiohttp.TCPConnector(limit=conc, limit_per_host=conc, ttl_dns_cache=None)
    ends: list[float] = []
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        # Open the connections before the clock starts (a client keeps its connection).
        async def touch(k: int) -> None:
            async with session.get(spec["bases"][k % len(spec["bases"])] + "/healthz") as r:
                await r.read()

        await asyncio.gather(*(touch(k) for k in range(conc)))
        while time.time() < spec["start_at"]:
            await asyncio.sleep(0.005)
        cpu0 = time.process_time()
        start = time.perf_counter()
        deadline = start + spec["time_limit_s"]

        async def worker(k: int) -> None:
            nonlocal next_i
            url = urls[k % len(urls)]
            while next_i < n and time.perf_counter() < deadline:
                i = next_i
                next_i += 1
                body = bodies[i % len(bodies)] if bodies else None
                target = url
                if method == "GET" and body is not None:  # a query string, no body
                    target, body = url + "?" + body.decode(), None
                t0 = time.perf_counter()
                try:
                    async with session.request(
                        method, target, data=body, headers=headers if body else None
                    ) as r:
                        data = await r.read()
                        status = r.status
                except Exception as exc:  # noqa: BLE001 - counted, reported
                    name = type(exc).__name__
                    errors[name] = errors.get(name, 0) + 1
                    continue
                t1 = time.perf_counter()
                if status != 200:
                    errors[f"http {status}"] = errors.get(f"http {status}", 0) + 1
                    continue
                lat.append(t1 - t0)
                ends.append(t1)
                m = took_re.search(data)
                if m:
                    took.append(float(m.group(1)))

        await asyncio.gather(*(worker(k) for k in range(conc)))
        wall = (max(ends) if ends else time.perf_counter()) - start
        cpu = time.process_time() - cpu0
    return {
        "lat": lat,
        "took_ms": took,
        "errors": errors,
        "wall_s": wall,
        "cpu_s": cpu,
        "attempted": next_i,
    }


def drive(
    base: str,
    method: str,
    path: str,
    bodies: list[str],
    n: int,
    conc: int,
    procs: int,
    time_limit_s: float,
    server_pid: int,
) -> dict[str, Any]:
    """Run ``n`` requests from ``procs`` load-generator processes; merged results."""
    procs = max(1, min(procs, conc))
    start_at = time.time() + 1.5 + 0.5 * procs  # all processes start together
    children = []
    tmp = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    for k in range(procs):
        share = conc // procs + (1 if k < conc % procs else 0)
        count = n // procs + (1 if k < n % procs else 0)
        mine = bodies[k::procs] if bodies else []
        spec = {
            "bases": base.split(","),
            "path": path,
            "method": method,
            "bodies": mine,
            "n": count,
            "concurrency": share,
            "start_at": start_at,
            "time_limit_s": time_limit_s,
            "request_timeout_s": max(30.0, time_limit_s),
        }
        p = tmp / f"spec{k}.json"
        p.write_text(json.dumps(spec))
        children.append(
            subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--_loadgen", str(p)],
                cwd=REPO,
                stdout=subprocess.PIPE,
            )
        )
    # CPU counters around the measured window (the children wait for start_at).
    while time.time() < start_at - 0.2:
        time.sleep(0.05)
    cpu0 = tree_cpu([server_pid])
    m0 = machine_cpu()
    outs = [json.loads(c.communicate()[0].decode().strip().splitlines()[-1]) for c in children]
    cpu1 = tree_cpu([server_pid])
    m1 = machine_cpu()
    shutil.rmtree(tmp, ignore_errors=True)
    lat = [x for o in outs for x in o["lat"]]
    took = [x for o in outs for x in o["took_ms"]]
    errors: dict[str, int] = {}
    for o in outs:
        for k, v in o["errors"].items():
            errors[k] = errors.get(k, 0) + v
    wall = max(o["wall_s"] for o in outs)
    res = summarize(lat, wall)
    res["errors"] = sum(errors.values())
    res["error_kinds"] = errors
    res["attempted"] = sum(o["attempted"] for o in outs)
    res["wall_s"] = round(wall, 3)
    if took:
        res["server_took_p50_ms"] = round(float(np.percentile(took, 50)), 3)
        res["server_took_p95_ms"] = round(float(np.percentile(took, 95)), 3)
    done = max(1, len(lat))
    cpu = {role: cpu1.get(role, 0.0) - cpu0.get(role, 0.0) for role in cpu1}
    cpu["load generator"] = sum(o["cpu_s"] for o in outs)
    res["cpu_ms_per_req"] = {k: round(v * 1e3 / done, 3) for k, v in sorted(cpu.items()) if v > 0}
    res["machine_busy"] = round((m1[0] - m0[0]) / max(1.0, m1[1] - m0[1]), 3)
    res["client_procs"] = procs
    return res


# -- one store size through the server ---------------------------------------------------------
def make_variants(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Server configurations to measure (``--variants``), each with any --setting and
    --server-env: "default" = ``mnemoray serve`` as a user starts it (direct ingress:
    the replica answers on the port itself), "proxy" = ``--ingress proxy`` (Ray Serve's
    HTTP proxy in front: the default before), "default2" = the default with 2 ingress
    replicas sharing the one port (the kernel spreads the clients' connections)."""
    settings = dict(s.split("=", 1) for s in args.setting)
    env = dict(s.split("=", 1) for s in args.server_env)
    base = {"name": "default", "settings": settings, "env": env}
    chosen = {
        "default": base,
        "proxy": {**base, "name": "proxy", "settings": {**settings, "server.ingress": "proxy"}},
        "default2": {**base, "name": "default2", "settings": {**settings, "server.replicas": 2}},
    }
    return [chosen[name] for name in args.variants.split(",")]


def serve_runs(
    label: str,
    store_dir: Path,
    users: int,
    queries: list[str],
    levels: list[tuple[int, int]],
    args: argparse.Namespace,
    variant: dict[str, Any],
    log: Any,
) -> dict[str, Any]:
    settings = dict(variant["settings"])
    env = dict(variant["env"])
    log_path = CACHE / f"server-{label}-{variant['name']}.log"
    CACHE.mkdir(parents=True, exist_ok=True)
    log(f"{label} / {variant['name']}: settings {settings}, env {env}")
    server = Server(store_dir, settings, env, log_path)
    out: dict[str, Any] = {
        "variant": variant["name"],
        "settings": settings,
        "server_env": env,
        "rows": [],
    }
    rng = random.Random(f"serve-{args.seed}-{label}")
    qi = iter(queries)

    def bodies(n: int) -> list[str]:
        return [
            json.dumps(
                {
                    "app_name": APP,
                    "user_id": f"u{rng.randrange(users):04d}",
                    "query": next(qi),
                    "top_k": TOP_K,
                }
            )
            for _ in range(n)
        ]

    def query_strings(n: int) -> list[str]:
        return [
            urllib.parse.urlencode(
                {
                    "app_name": APP,
                    "user_id": f"u{rng.randrange(users):04d}",
                    "query": next(qi),
                    "top_k": TOP_K,
                }
            )
            for _ in range(n)
        ]

    try:
        out["startup_s"] = round(server.wait_ready(args.startup_timeout), 1)
        log(f"  server up in {out['startup_s']} s on port {server.port} (log {log_path})")
        pid = server.proc.pid
        out["target"] = server.base  # one URL, whatever answers there (proxy or replicas)
        # Cold: each user's first recall builds its candidate set in the replica.
        cold_bodies = [
            json.dumps({"app_name": APP, "user_id": f"u{u:04d}", "query": next(qi), "top_k": TOP_K})
            for u in range(users)
        ]
        cold = drive(
            server.base.split(",")[0],
            "POST",
            "/v1/recall",
            cold_bodies,
            len(cold_bodies),
            1,
            1,
            args.time_limit * 4,
            pid,
        )
        for other in server.base.split(",")[1:]:  # every replica warms its own caches
            drive(
                other,
                "POST",
                "/v1/recall",
                [json.dumps({**json.loads(b), "query": next(qi)}) for b in cold_bodies],
                len(cold_bodies),
                1,
                1,
                args.time_limit * 4,
                pid,
            )
        out["cold"] = cold
        log(
            f"  cold (first recall of each of {users} users): p50 {cold.get('p50_ms')} ms, "
            f"max {cold.get('max_ms')} ms, errors {cold['errors']}"
        )
        if args.settle > 0:
            out["settle"] = settle(
                server,
                [
                    json.dumps(
                        {
                            "app_name": APP,
                            "user_id": f"u{u:04d}",
                            "query": next(qi) + TIME_TAIL,
                            "top_k": TOP_K,
                        }
                    )
                    for u in range(users)
                ],
                args.settle,
                pid,
            )
            log(f"  settled: {out['settle']}")
        drive(server.base, "GET", "/healthz", [], args.warmup, 8, 1, args.time_limit, pid)
        drive(
            server.base,
            "POST",
            "/v1/recall",
            bodies(args.warmup),
            args.warmup,
            8,
            1,
            args.time_limit,
            pid,
        )
        for conc, n in levels:
            procs = args.client_procs if conc > 1 else 1
            runs = [
                ("GET /healthz", "GET", "/healthz", []),
                ("POST /v1/recall", "POST", "/v1/recall", bodies(n)),
            ]
            if args.recall_get:
                runs.append(("GET /v1/recall", "GET", "/v1/recall", query_strings(n)))
            for name, method, path, bs in runs:
                m0 = replica_metrics(server) if path == "/v1/recall" else {}
                load0 = os.getloadavg()[0]
                res = drive(server.base, method, path, bs, n, conc, procs, args.time_limit, pid)
                m1 = replica_metrics(server) if path == "/v1/recall" else {}
                if m0 and m1 and m1.get("recall_count", 0) > m0.get("recall_count", 0):
                    dn = m1["recall_count"] - m0["recall_count"]
                    res["replica_mean_ms"] = round(
                        (m1["recall_sum"] - m0["recall_sum"]) * 1e3 / dn, 3
                    )
                    db = m1.get("batch_count", 0) - m0.get("batch_count", 0)
                    if db > 0:
                        res["embed_batch_mean"] = round((m1["batch_sum"] - m0["batch_sum"]) / db, 2)
                res.update({"layer": name, "concurrency": conc, "load_1m_before": load0})
                out["rows"].append(res)
                log(
                    f"  C={conc:<3} {name:<16} {res.get('rps', 0):>7.1f} req/s  p50 "
                    f"{res.get('p50_ms', float('nan')):7.2f}  p95 "
                    f"{res.get('p95_ms', float('nan')):7.2f}  p99 "
                    f"{res.get('p99_ms', float('nan')):7.2f} ms  errors {res['errors']}  "
                    f"busy {res['machine_busy']:.0%}  cpu ms/req {res['cpu_ms_per_req']}"
                )
    finally:
        server.stop()
    return out


# A time intent on a query ("last March"): a user's first one starts the background pass
# that resolves the time named in all of the user's records (mnemoray.memory.recall.record_times).
TIME_TAIL = " since last March"  # no query template says "since": never a repeat
SETTLE_IDLE_CORE = 0.1  # replica CPU share of one core below which it counts as idle
SETTLE_WINDOW_S = 3.0


def settle(server: Server, time_bodies: list[str], timeout_s: float, pid: int) -> dict[str, Any]:
    """Start every user's background time pass (one recall with a time intent each), then
    wait until the replicas are idle, at most ``timeout_s``: the runs after measure the
    steady state a server reaches once the passes are done (each user's costs once per
    server start), not the one-off. Returns what the passes cost: seconds waited and the
    replicas' CPU seconds, from the first of these recalls to idle."""

    def replica_cpu() -> float:
        return tree_cpu([pid]).get("replica", 0.0)

    cpu0, start = replica_cpu(), time.perf_counter()
    drive(server.base, "POST", "/v1/recall", time_bodies, len(time_bodies), 1, 1, timeout_s, pid)
    idle = False
    while time.perf_counter() - start < timeout_s:
        a = replica_cpu()
        time.sleep(SETTLE_WINDOW_S)
        if replica_cpu() - a < SETTLE_IDLE_CORE * SETTLE_WINDOW_S:
            idle = True
            break
    return {
        "idle": idle,
        "waited_s": round(time.perf_counter() - start, 1),
        "replica_cpu_s": round(replica_cpu() - cpu0, 1),
        "recalls": len(time_bodies),
    }


# -- report --------------------------------------------------------------------------------------
def _line(label: str, layer: str, conc: int, r: dict[str, Any]) -> str:
    if not r.get("n"):
        return (
            f"{label:<5} {layer:<48} {conc:>3}     0 {'-':>7} {'-':>7} {'-':>7} {'-':>7} "
            f"{r.get('errors', 0):>4}"
        )
    return (
        f"{label:<5} {layer:<48} {conc:>3} {r['n']:>5} {r['rps']:>7.1f} "
        f"{r['p50_ms']:>7.2f} {r['p95_ms']:>7.2f} {r['p99_ms']:>7.2f} "
        f"{r.get('errors', 0):>4}"
    )


def _tag(variant: str) -> str:
    return "" if variant == "default" else f" [{variant}]"


def table(results: dict[str, Any]) -> str:
    head = (
        f"{'size':<5} {'layer':<48} {'C':>3} {'n':>5} {'req/s':>7} {'p50 ms':>7} "
        f"{'p95 ms':>7} {'p99 ms':>7} {'err':>4}"
    )
    lines = [head, "-" * len(head)]
    for label, r in results["sizes"].items():
        for row in r["inprocess"]:
            lines.append(_line(label, row["layer"], 1, row))
        for variant, v in r["serve"].items():
            cold = v.get("cold")
            if cold:
                lines.append(
                    _line(label, "POST /v1/recall, first per user (cold)" + _tag(variant), 1, cold)
                )
            for row in v["rows"]:
                lines.append(_line(label, row["layer"] + _tag(variant), row["concurrency"], row))
    return "\n".join(lines)


CPU_ROLES = ("proxy", "replica", "controller", "other replicas", "ray + other", "load generator")


def cpu_table(results: dict[str, Any]) -> str:
    head = (
        f"{'size':<5} {'variant':<8} {'endpoint':<16} {'C':>3} {'busy':>5} "
        + " ".join(f"{r[:10]:>10}" for r in CPU_ROLES)
        + f" {'in-replica':>10} {'batch':>5}"
    )
    lines = [head, "-" * len(head)]
    for label, r in results["sizes"].items():
        for variant, v in r["serve"].items():
            for row in v["rows"]:
                c = row.get("cpu_ms_per_req", {})
                lines.append(
                    f"{label:<5} {variant:<8} {row['layer']:<16} {row['concurrency']:>3} "
                    f"{row['machine_busy']:>5.0%} "
                    + " ".join(f"{c.get(k, 0):>10.2f}" for k in CPU_ROLES)
                    + f" {row.get('replica_mean_ms', float('nan')):>10.2f}"
                    + f" {row.get('embed_batch_mean', float('nan')):>5.1f}"
                )
    return "\n".join(lines)


P50_BUDGET_MS = 15.0  # "about 15 ms": 2x the ~7 ms healthz p50 a first probe measured


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    label = "1m" if "1m" in results["sizes"] else next(iter(results["sizes"]))
    out = []
    serve = results["sizes"][label]["serve"]
    # The floor is Serve's app as deployed through its HTTP proxy ("proxy"; the
    # default before direct ingress), for every variant; without it, the variant's own.
    floor = (
        {(r["layer"], r["concurrency"]): r for r in serve["proxy"]["rows"]}
        if "proxy" in serve
        else None
    )
    for variant, v in serve.items():
        rows = {(r["layer"], r["concurrency"]): r for r in v["rows"]}
        base = floor or rows
        which = "proxy app" if floor else "same app"
        where = f"{label}{_tag(variant)}"
        h1, r1 = base.get(("GET /healthz", 1)), rows.get(("POST /v1/recall", 1))
        if h1 and r1 and h1.get("n") and r1.get("n"):
            out.append(
                {
                    "variant": variant,
                    "goal": f"{where}: C=1 recall p50 <= 2x healthz p50 ({which})",
                    "value": f"{r1['p50_ms']:.2f} ms vs 2 x {h1['p50_ms']:.2f} = "
                    f"{2 * h1['p50_ms']:.2f} ms",
                    "met": r1["p50_ms"] <= 2 * h1["p50_ms"],
                }
            )
            out.append(
                {
                    "variant": variant,
                    "goal": f"{where}: C=1 recall p50 <= {P50_BUDGET_MS:.0f} ms",
                    "value": f"{r1['p50_ms']:.2f} ms",
                    "met": r1["p50_ms"] <= P50_BUDGET_MS,
                }
            )
        top = max(c for _, c in rows)
        h, r = base.get(("GET /healthz", top)), rows.get(("POST /v1/recall", top))
        if h and r and h.get("n") and r.get("n"):
            out.append(
                {
                    "variant": variant,
                    "goal": f"{where}: C={top} recall req/s >= 50% of healthz req/s ({which})",
                    "value": f"{r['rps']:.1f} vs 0.5 x {h['rps']:.1f} = "
                    f"{0.5 * h['rps']:.1f} ({r['rps'] / h['rps']:.0%})",
                    "met": r["rps"] >= 0.5 * h["rps"],
                }
            )
        floor_enc = results.get("encoder_floor")
        if floor_enc and r1 and r1.get("n"):
            one = floor_enc["one_encode_p50_ms"]
            out.append(
                {
                    "variant": variant,
                    "goal": f"{where}: C=1 recall p50 <= 2x one encode p50",
                    "value": f"{r1['p50_ms']:.2f} ms vs 2 x {one:.2f} = {2 * one:.2f} ms",
                    "met": r1["p50_ms"] <= 2 * one,
                }
            )
        if floor_enc and r and r.get("n"):
            rate = floor_enc["issue_rate_qps"]
            out.append(
                {
                    "variant": variant,
                    "goal": f"{where}: C={top} recall req/s >= 0.5x the cores' one-query "
                    f"encode rate",
                    "value": f"{r['rps']:.1f} vs 0.5 x {rate:.1f} = {0.5 * rate:.1f} "
                    f"({r['rps'] / rate:.2f}x; measured rate "
                    f"{floor_enc['parallel_rate_qps']:.1f}: "
                    f"{r['rps'] / floor_enc['parallel_rate_qps']:.2f}x)",
                    "met": r["rps"] >= 0.5 * rate,
                }
            )
        errs = sum(x["errors"] for x in rows.values())
        out.append(
            {
                "variant": variant,
                "goal": f"{where}: zero errors",
                "value": str(errs),
                "met": errs == 0,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="100k only, fewer requests (a fast check)"
    )
    parser.add_argument("--sizes", default=None, help="comma-separated: 15k, 100k, 1m")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument(
        "--requests",
        default=None,
        help="requests per run for each concurrency (default 300,1000,2000)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=90.0,
        help="seconds per run at most (a run stops early, counted)",
    )
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument(
        "--client-procs",
        type=int,
        default=1,
        help="load-generator processes for C > 1 (each one asyncio loop)",
    )
    parser.add_argument("--inprocess-n", type=int, default=300)
    parser.add_argument("--pool", type=int, default=20_000, help="unique embedded texts")
    parser.add_argument("--noise", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--users", type=int, default=None, help="override users of every size (development)"
    )
    parser.add_argument(
        "--per-user",
        type=int,
        default=None,
        help="override memories per user of every size (development)",
    )
    parser.add_argument(
        "--setting", action="append", default=[], help="serving setting key=value (repeatable)"
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        help="server environment KEY=VALUE (repeatable)",
    )
    parser.add_argument("--skip-inprocess", action="store_true")
    parser.add_argument(
        "--variants",
        default=None,
        help="server configurations: default (mnemoray serve: direct "
        "ingress), proxy (--ingress proxy), default2 (2 replicas on the "
        "port); default: proxy,default (--quick: default)",
    )
    parser.add_argument(
        "--recall-get",
        action="store_true",
        help="also drive GET /v1/recall (query string, no request body)",
    )
    parser.add_argument(
        "--build-only",
        action="store_true",
        help="embed the pool and build (cache) the stores, then stop",
    )
    parser.add_argument("--startup-timeout", type=float, default=600.0)
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="after the cold recalls, start every user's background time "
        "pass and wait up to this many seconds for the replicas to go idle "
        "(measure the steady state; 0: do not wait, as before)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--_loadgen", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._loadgen:
        _loadgen_main(args._loadgen)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    sizes = (args.sizes or ("100k" if args.quick else "100k,1m")).split(",")
    args.variants = args.variants or ("default" if args.quick else "proxy,default")
    concs = [int(c) for c in args.concurrency.split(",")]
    reqs = [
        int(n)
        for n in (args.requests or ("100,300,600" if args.quick else "300,1000,2000")).split(",")
    ]
    if len(reqs) != len(concs):
        parser.error("--requests needs one count per --concurrency level")
    levels = list(zip(concs, reqs, strict=True))
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {msg}", flush=True)

    load_start = os.getloadavg()
    log(f"load average {load_start}; sizes {sizes}; levels {levels}")
    pool, pool_vecs, model_id = load_pool(args.pool, args.seed, log)
    # Every request gets a query never sent before (per server / in-process service).
    max_users = args.users or max(SIZES[s][0] for s in sizes)
    queries = make_queries(
        3 * max_users
        + 3 * args.inprocess_n
        + args.warmup
        + sum(reqs) * (2 if args.recall_get else 1)
        + 500,
        args.seed,
    )
    variants = make_variants(args)
    results: dict[str, Any] = {"sizes": {}}
    if not args.build_only:
        results["encoder_floor"] = encoder_floor(queries[-400:], 300, log)
    for label in sizes:
        users, per_user = SIZES[label]
        users = args.users or users
        per_user = args.per_user or per_user
        store_dir, info = build_store(
            label, users, per_user, pool, pool_vecs, model_id, args.noise, args.seed, log
        )
        log(
            f"{label}: {info['rows']:,} memories, {info['segments']} segments, "
            f"{info['bytes'] / 2**20:.0f} MiB at {store_dir}"
        )
        if args.build_only:
            continue
        entry: dict[str, Any] = {"store": info, "load_before": os.getloadavg()}
        entry["inprocess"] = (
            []
            if args.skip_inprocess
            else inprocess_layers(
                store_dir,
                queries,
                users,
                args.inprocess_n,
                50 if info["rows"] > 200_000 else 200,
                args.seed,
                log,
            )
        )
        entry["serve"] = {
            v["name"]: serve_runs(label, store_dir, users, queries, levels, args, v, log)
            for v in variants
        }
        entry["load_after"] = os.getloadavg()
        results["sizes"][label] = entry
    if args.build_only:
        return

    results["goals"] = goals(results)
    load_end = os.getloadavg()
    from importlib.metadata import version

    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_start": load_start,
            "load_average_end": load_end,
        },
        "versions": {
            d: version(d)
            for d in (
                "ray",
                "fastapi",
                "starlette",
                "uvicorn",
                "onnxruntime",
                "faiss-cpu",
                "aiohttp",
            )
            if _has(d)
        },
        "config": {
            "sizes": {s: SIZES[s] for s in sizes},
            "levels": levels,
            "time_limit_s": args.time_limit,
            "warmup": args.warmup,
            "client_procs": args.client_procs,
            "pool": args.pool,
            "settle_s": args.settle,
            "noise": args.noise,
            "seed": args.seed,
            "top_k": TOP_K,
            "chunk_rows": CHUNK_ROWS,
            "index_kind": "flat",
            "settings": args.setting,
            "server_env": args.server_env,
            "variants": variants,
            "quick": args.quick,
            "users_override": args.users,
            "per_user_override": args.per_user,
        },
        **results,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print()
    print(table(results))
    print()
    print(
        "CPU ms per request by process (from /proc; 'busy' = the whole machine's busy "
        "share), the replica's own mean /v1/recall time and mean query-embedding batch:"
    )
    print(cpu_table(results))
    print()
    for g in results["goals"]:
        print(f"goal {'MET    ' if g['met'] else 'NOT MET'} {g['goal']}: {g['value']}")
    print(f"load average: start {load_start}, end {load_end}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


def _has(dist: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(dist)
        return True
    except PackageNotFoundError:
        return False


if __name__ == "__main__":
    main()
