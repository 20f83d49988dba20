"""Recall quality and latency of MemoryService on a generated multi-session dataset.

1. Dataset: ``benchmarks/datagen.py`` (users x sessions, planted facts, paraphrase /
   keyword / changed-fact queries with ground truth), cached under
   ``benchmarks/.cache/dataset-<fingerprint>/``.
2. Ingest, once: every session is distilled with the service's own summarizer
   (extractive) and chunking, embedded with the service's embedder (MiniLM) and
   committed to a fresh store in one write, the layout a backfill produces.
   The online path (``MemoryService.add_session``, one commit per session) is
   timed separately on a sample of sessions into a scratch store.
3. Quality: every query is run through ``MemoryService.search`` (top 10) in each
   mode (keyword / dense / hybrid); recall@1/5/10 and MRR@10 per query kind;
   tenant isolation (results of another user = errors, must be 0); for changed
   facts, how often the stale value comes first.
4. Latency: in-process ``MemoryService.search`` p50/p95 (query embedding
   included), search alone given a precomputed query vector
   (``service.retriever.search_user``), and the query embedding alone, on the
   dataset store and on stores with ~10K and ~100K synthetic memories
   (10K memories in the queried user's slice). Synthetic texts are generated
   from the same templates and embedded once; embeddings are cached as .npy under
   ``benchmarks/.cache/synth-emb/``.

Run: ``.venv/bin/python benchmarks/recall_quality.py`` (full: 200 users x 10
sessions, 10K + 100K synthetic; the first run embeds ~60K synthetic texts, minutes on
2 cores) or ``--quick``. Prints tables, writes ``benchmarks/results/recall_quality.json``
and the "Recall quality" section of ``benchmarks/results/HISTORY.md`` (the run log).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

# The repo root, so that `python benchmarks/recall_quality.py` imports like `-m`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import datagen  # noqa: E402
from benchmarks.history import update_section  # noqa: E402
from mnemoray.backfill.archive import read_archive  # noqa: E402
from mnemoray.embedders import write_model  # noqa: E402
from mnemoray.memory.recall.config import RetrievalConfig  # noqa: E402
from mnemoray.memory.records.distill import distill_session  # noqa: E402
from mnemoray.memory.records.record import Memory  # noqa: E402
from mnemoray.memory.service.service import MemoryService  # noqa: E402
from mnemoray.memory.store.parquet.store import MemoryStore  # noqa: E402
from mnemoray.memory.store.writes import session_content_hash  # noqa: E402
from mnemoray.sessions.events import iso  # noqa: E402

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
RESULTS = HERE / "results" / "recall_quality.json"
# The run log; benchmarks/README.md keeps the current figures (one table row, by hand).
README = HERE / "results" / "HISTORY.md"
MODES = ("keyword", "dense", "hybrid")
KINDS = ("paraphrase", "keyword", "changed")
TOP_K = 10
CUTOFFS = (1, 5, 10)
SYNTH_APP = "synth-app"
SYNTH_BATCH = 4096  # texts per cached embedding part

HIT_DEFINITION = (
    "hit = a returned memory of the query's own (app, user) from the answer session whose "
    "source_event_ids include the event that states the fact, OR whose text contains the "
    "answer (value or alias, case-insensitive, whole words). strict hit = from the answer "
    "session AND its text contains the answer (what an agent can read the answer off). "
    "R@k = share of queries with a hit in the top k; MRR = mean 1/rank of the first hit "
    "within the top 10 (0 if none). For 'changed' facts only the NEWER statement's session "
    "counts; stale@1 = share of changed queries whose top result is the superseded "
    "statement's session and holds the old value. foreign = results belonging to another "
    "user or app (must be 0)."
)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    i = (len(s) - 1) * q / 100
    lo, hi = int(i), min(int(i) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (i - lo)


def machine_info() -> dict[str, Any]:
    import faiss
    import torch

    from benchmarks.machine import machine

    return {
        **machine(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "faiss": faiss.__version__,
        "numpy": np.__version__,
    }


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# ---------------------------------------------------------------------------
# Ingest
# ---------------------------------------------------------------------------
def ingest_batch(service: MemoryService, sessions: list, cache: EmbedCache) -> dict[str, Any]:
    """Distill every session (the service's summarizer and chunking), embed each
    record's key_text with the service's embedder (through the text cache), commit in
    one store write with the sessions' ledger hashes."""
    t0 = time.perf_counter()
    records: list[Memory] = []
    hashes = []
    for s in sessions:
        records += distill_session(
            s, service.summarizer, chunk_turns=service.chunk_turns, ttl_s=service.ttl_s
        )
        hashes.append(session_content_hash(s))
    t_distill = time.perf_counter() - t0
    log(
        f"distilled {len(sessions)} sessions -> {len(records)} memories in {t_distill:.1f}s; "
        f"embedding..."
    )
    t1 = time.perf_counter()
    vectors, emb = cache.encode([m.key_text for m in records], "dataset memories")
    embedded = [m.with_embedding(v) for m, v in zip(records, vectors, strict=True)]
    t_embed = time.perf_counter() - t1
    t2 = time.perf_counter()
    model, dim = write_model(service.store, service.embedder)
    result = service.store.write_segment(
        embedded, model, dim, session_hashes=hashes, summarizer=service.summarizer.name
    )
    t_write = time.perf_counter() - t2
    kinds = Counter(m.kind for m in records)
    return {
        "path": "batch: distill_session + embed key_text + one store.write_segment",
        "sessions": len(sessions),
        "memories": result.written,
        "memories_by_kind": dict(sorted(kinds.items())),
        "distill_s": round(t_distill, 2),
        "embed_s": round(t_embed, 2),
        "write_s": round(t_write, 2),
        "total_s": round(time.perf_counter() - t0, 2),
        "embedding": emb,
        "embed_per_s": emb["per_s"],
    }


def ingest_online_sample(sessions: list, store_dir: Path, n: int) -> dict[str, Any]:
    """``MemoryService.add_session`` one session at a time (one commit each)."""
    shutil.rmtree(store_dir, ignore_errors=True)
    svc = MemoryService.open(store_dir, embedder="default", summarizer="extractive")
    times = []
    added = 0
    for s in sessions[:n]:
        t = time.perf_counter()
        added += len(svc.add_session(s))
        times.append((time.perf_counter() - t) * 1000)
    # Re-adding is a ledger hit (idempotent): nothing is written.
    t = time.perf_counter()
    again = sum(len(svc.add_session(s)) for s in sessions[:n])
    readd_ms = (time.perf_counter() - t) * 1000 / max(n, 1)
    tail = times[-max(1, n // 10) :]
    out = {
        "sessions": len(times),
        "memories": added,
        "readded_memories": again,
        "ms_per_session_p50": round(pct(times, 50), 1),
        "ms_per_session_p95": round(pct(times, 95), 1),
        "ms_per_session_first10pct": round(statistics.mean(times[: max(1, n // 10)]), 1),
        "ms_per_session_last10pct": round(statistics.mean(tail), 1),
        "ms_per_readd": round(readd_ms, 1),
        "segments": sum(len(s) for s in svc.store.manifest().segments),
    }
    shutil.rmtree(store_dir, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------
# Quality
# ---------------------------------------------------------------------------
def _alias_re(aliases: Sequence[str]) -> re.Pattern[str]:
    alts = "|".join(re.escape(a) for a in sorted(aliases, key=len, reverse=True))
    return re.compile(rf"(?<![\w]){alts}(?![\w])", re.IGNORECASE)


def judge(q: dict[str, Any], results: list) -> dict[str, Any]:
    answer = _alias_re(q["answer_aliases"])
    events = set(q["answer_event_ids"])
    first = first_strict = None
    foreign = 0
    for rank, r in enumerate(results, start=1):
        m = r.memory
        if (m.app_name, m.user_id) != (q["app_name"], q["user_id"]):
            foreign += 1
            continue
        if m.session_id != q["answer_session_id"]:
            continue
        says = bool(answer.search(m.text))
        if first is None and (says or events.intersection(m.source_event_ids)):
            first = rank
        if first_strict is None and says:
            first_strict = rank
    stale = False
    if q["kind"] == "changed" and results and first != 1:
        top = results[0].memory
        stale = top.session_id == q["stale_session_id"] and bool(
            _alias_re([q["stale_text"]]).search(top.text)
        )
    top_kind = results[0].memory.kind if results else None
    return {
        "rank": first,
        "strict_rank": first_strict,
        "foreign": foreign,
        "stale1": stale,
        "n_results": len(results),
        "top_kind": top_kind,
    }


def summarize(judged: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(judged)
    if not n:
        return {"n": 0}
    out: dict[str, Any] = {"n": n}
    for k in CUTOFFS:
        out[f"R@{k}"] = round(sum(1 for j in judged if j["rank"] and j["rank"] <= k) / n, 4)
    out["MRR"] = round(sum(1 / j["rank"] for j in judged if j["rank"]) / n, 4)
    for k in CUTOFFS:
        out[f"strict_R@{k}"] = round(
            sum(1 for j in judged if j["strict_rank"] and j["strict_rank"] <= k) / n, 4
        )
    out["strict_MRR"] = round(sum(1 / j["strict_rank"] for j in judged if j["strict_rank"]) / n, 4)
    out["foreign"] = sum(j["foreign"] for j in judged)
    out["stale@1"] = round(sum(j["stale1"] for j in judged) / n, 4)
    out["top1_hit_kinds"] = dict(Counter(j["top_kind"] for j in judged if j["rank"] == 1))
    return out


def _config_dict(config: RetrievalConfig) -> dict[str, Any]:
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in asdict(config).items()}


def evaluate(
    runs: list[tuple[str, MemoryService, str]],
    queries: list[dict[str, Any]],
) -> dict[str, Any]:
    """runs: (label, service, mode); every query through ``service.search``."""
    out: dict[str, Any] = {}
    for label, service, mode in runs:
        t0 = time.perf_counter()
        judged = []
        lat = []
        for q in queries:
            t = time.perf_counter()
            results = service.search(
                q["app_name"], q["user_id"], q["query"], top_k=TOP_K, mode=mode
            )
            lat.append((time.perf_counter() - t) * 1000)
            judged.append({**judge(q, results), "kind": q["kind"], "category": q["category"]})
        by_kind = {k: summarize([j for j in judged if j["kind"] == k]) for k in KINDS}
        by_category = {
            c: summarize([j for j in judged if j["category"] == c])
            for c in sorted({q["category"] for q in queries})
        }
        out[label] = {
            "mode": mode,
            "retrieval": _config_dict(service.config),
            "all": summarize(judged),
            "by_kind": by_kind,
            "by_category": {
                c: {k: v[k] for k in ("n", "R@1", "R@5", "MRR")} for c, v in by_category.items()
            },
            "eval_s": round(time.perf_counter() - t0, 1),
            "search_ms_p50_during_eval": round(pct(lat, 50), 2),
        }
        a = out[label]["all"]
        log(
            f"  {label:20s} R@1 {a['R@1']:.3f} R@5 {a['R@5']:.3f} R@10 {a['R@10']:.3f} "
            f"MRR {a['MRR']:.3f} foreign {a['foreign']} ({out[label]['eval_s']}s)"
        )
    return out


# ---------------------------------------------------------------------------
# Latency
# ---------------------------------------------------------------------------
def stats_ms(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(pct(values, 50), 3),
        "p95": round(pct(values, 95), 3),
        "mean": round(statistics.mean(values), 3) if values else float("nan"),
    }


def _drop_query_cache(service: MemoryService) -> bool:
    """Empty the service's query-embedding cache (private; False if it has none)."""
    cache = getattr(service, "_query_cache", None)
    if cache is None or not hasattr(cache, "clear"):
        return False
    cache.clear()
    return True


def measure_latency(
    service: MemoryService,
    probes: list[tuple[str, str, str]],
) -> dict[str, Any]:
    """probes: (app, user, query). Per mode: e2e ``service.search`` and search given a
    precomputed query vector; once: the query embedding alone. All measurements are
    interleaved probe by probe (a noisy neighbour on a shared machine then hits every
    column alike) after one warm-up pass."""
    embedder = service.embedder
    snap = service.snapshot()
    # Cold: the first query of a scope builds its candidate set (+ BM25 / entity index).
    service.retriever.clear()
    seen: set[tuple[str, str]] = set()
    cold = []
    for app, user, query in probes:
        if (app, user) in seen:
            continue
        seen.add((app, user))
        t = time.perf_counter_ns()
        service.search(app, user, query, top_k=TOP_K, mode="hybrid")
        cold.append((time.perf_counter_ns() - t) / 1e6)
    vecs = {q: embedder.encode([q])[0] for _, _, q in probes} if embedder else {}

    def timed(fn: Callable[[], Any]) -> float:
        t = time.perf_counter_ns()
        fn()
        return (time.perf_counter_ns() - t) / 1e6

    cols: dict[str, list[float]] = defaultdict(list)
    la = loadavg()
    for warm in (True, False):
        for app, user, query in probes:
            row: dict[str, float] = {}
            if embedder is not None:
                row["embed"] = timed(lambda q=query: embedder.encode([q]))
            for mode in MODES:

                def e2e(m: str = mode, a: str = app, u: str = user, q: str = query) -> None:
                    service.search(a, u, q, top_k=TOP_K, mode=m)

                # A new query: the service's query-embedding cache must not answer it.
                cache_cleared = _drop_query_cache(service)
                row[f"{mode}/e2e"] = timed(e2e)
                row[f"{mode}/e2e_cached"] = timed(e2e)  # the same query again
                vec = None if mode == "keyword" else vecs.get(query)
                row[f"{mode}/search"] = timed(
                    lambda m=mode, a=app, u=user, q=query, v=vec: service.retriever.search_user(
                        snap, a, u, q, v, TOP_K, None, m
                    )
                )
            if not warm:
                for k, v in row.items():
                    cols[k].append(v)
    out: dict[str, Any] = {
        "probes": len(probes),
        "scopes": len(seen),
        "cold_first_query_hybrid_ms": stats_ms(cold),
        "query_cache_cleared": cache_cleared,
        "loadavg": [la, loadavg()],
    }
    if embedder is not None:
        out["embed_query_ms"] = stats_ms(cols["embed"])
    for mode in MODES:
        out[mode] = {
            "e2e_ms": stats_ms(cols[f"{mode}/e2e"]),
            "e2e_cached_query_ms": stats_ms(cols[f"{mode}/e2e_cached"]),
            "search_only_ms": stats_ms(cols[f"{mode}/search"]),
        }
        log(
            f"    {mode:8s} e2e p50 {out[mode]['e2e_ms']['p50']:.2f} "
            f"p95 {out[mode]['e2e_ms']['p95']:.2f} | search-only p50 "
            f"{out[mode]['search_only_ms']['p50']:.2f} p95 "
            f"{out[mode]['search_only_ms']['p95']:.2f} ms"
        )
    if embedder is not None:
        log(
            f"    query embedding p50 {out['embed_query_ms']['p50']:.2f} "
            f"p95 {out['embed_query_ms']['p95']:.2f} ms (load {out['loadavg']})"
        )
    return out


def synth_texts(n: int, seed: int = 5) -> list[tuple[str, str]]:
    """(kind, text) memory texts like the distilled ones: facts, raw chunks, summaries."""
    rng = random.Random(f"synth:{seed}")
    topics = list(datagen.TOPICS.values())
    out: list[tuple[str, str]] = []

    def statement() -> str:
        cat = rng.choice(datagen.CATEGORIES)
        value = rng.choice(cat.values)
        slots = {**datagen._value_slots(cat, value, rng), "who": rng.choice(datagen.WHO)}
        pool = cat.statements + cat.near_misses
        return datagen._fill(rng.choice(pool), slots)

    def turn_pair() -> tuple[str, str]:
        step = rng.choice(rng.choice(topics))
        slots = datagen._slots(rng)
        return (
            datagen._fill(rng.choice(step.user), slots),
            datagen._fill(rng.choice(step.reply), slots),
        )

    day = 0.0
    for _ in range(n):
        day += rng.uniform(0, 0.3)
        date = iso(datagen.BASE_TS + day * 86400)[:10]
        r = rng.random()
        if r < 0.35:
            out.append(("fact", statement()))
        elif r < 0.9:
            lines = []
            for _ in range(rng.randint(1, 2)):
                u, a = turn_pair()
                if rng.random() < 0.3:
                    u = f"{u} {statement()}"
                lines += [f"[{date}] user: {u}", f"[{date}] assistant: {a}"]
            out.append(("chunk", "\n".join(lines)))
        else:
            u1, a1 = turn_pair()
            u2, _ = turn_pair()
            out.append(("session_summary", f"User: {u1}\nassistant: {a1}\nUser: {u2}"))
    return out


class EmbedCache:
    """Text -> embedding, persisted under ``.cache/emb/<model>/`` (parts of .npy + keys).

    Re-runs embed only texts never seen before (a changed summarizer, new synthetic
    texts). Vectors are the embedder's own output, so results are unchanged by it.
    """

    def __init__(self, embedder: Any, enabled: bool = True) -> None:
        self.embedder = embedder
        self.enabled = enabled
        tag = hashlib.sha256(f"{embedder.model_id}:{embedder.dim}".encode()).hexdigest()[:12]
        self.folder = CACHE / "emb" / tag
        self.vectors: dict[str, np.ndarray] = {}
        if enabled and self.folder.exists():
            for keys_path in sorted(self.folder.glob("part-*.keys.json")):
                vec_path = keys_path.with_name(keys_path.name.replace(".keys.json", ".npy"))
                if vec_path.exists():
                    keys = json.loads(keys_path.read_text())
                    self.vectors.update(zip(keys, np.load(vec_path), strict=True))

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def encode(
        self,
        texts: Sequence[str],
        label: str,
        batch: int = 2048,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Embeddings of ``texts`` in order, and {fresh, cached, embed_s, per_s}."""
        keys = [self.key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self.vectors))
        text_of = dict(zip(keys, texts, strict=True))
        t0 = time.perf_counter()
        for i in range(0, len(missing), batch):
            part = missing[i : i + batch]
            vecs = self.embedder.encode([text_of[k] for k in part], batch_size=128)
            self.vectors.update(zip(part, vecs, strict=True))
            if self.enabled:
                self._save(part, vecs)
            done = min(i + batch, len(missing))
            rate = done / (time.perf_counter() - t0)
            log(
                f"  {label}: embedded {done}/{len(missing)} new texts ({rate:.0f}/s, "
                f"eta {(len(missing) - done) / rate:.0f}s)"
            )
        spent = time.perf_counter() - t0
        out = (
            np.stack([self.vectors[k] for k in keys])
            if keys
            else np.zeros((0, self.embedder.dim), np.float32)
        )
        return out, {
            "texts": len(texts),
            "fresh": len(missing),
            "cached": len(set(keys)) - len(missing),
            "embed_s": round(spent, 2),
            "per_s": round(len(missing) / spent, 1) if missing and spent else None,
        }

    def _save(self, keys: list[str], vecs: np.ndarray) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"part-{time.time_ns()}-{os.getpid()}"
        tmp = self.folder / f".{name}.npy"
        np.save(tmp, np.asarray(vecs, dtype=np.float32))
        tmp.replace(self.folder / f"{name}.npy")
        tmp_keys = self.folder / f".{name}.keys.json"
        tmp_keys.write_text(json.dumps(keys))
        tmp_keys.replace(self.folder / f"{name}.keys.json")  # last: marks the part complete


def build_synth_store(
    store_dir: Path,
    users: int,
    per_user: int,
    texts: list[tuple[str, str]],
    vectors: dict[str, np.ndarray],
    model: str,
    dim: int,
) -> dict[str, Any]:
    shutil.rmtree(store_dir, ignore_errors=True)
    store = MemoryStore(store_dir, shards=8)
    t0 = time.perf_counter()
    for u in range(users):
        user = f"synth-{u:02d}"
        mems = []
        for i in range(per_user):
            kind, text = texts[(u * per_user + i) % len(texts)]
            session = f"{user}-s{i // 8:05d}"
            ts = datagen.BASE_TS + i * 900.0
            mems.append(
                Memory(
                    SYNTH_APP,
                    user,
                    session,
                    kind,
                    text,  # type: ignore[arg-type]
                    source_event_ids=(f"{session}-e{i % 8:03d}",),
                    event_time_start=ts,
                    event_time_end=ts + 60,
                    created_at=ts + 3600,
                ).with_embedding(vectors[text])
            )
        store.write_segment(mems, model, dim)
    m = store.manifest()
    return {
        "memories": users * per_user,
        "users": users,
        "per_user": per_user,
        "segments": sum(len(s) for s in m.segments),
        "build_s": round(time.perf_counter() - t0, 1),
    }


def synthetic_latency(
    embedder: Any,
    cache: EmbedCache,
    sizes: list[tuple[int, int]],
    query_texts: list[str],
    n_probes: int,
    distinct: bool,
) -> dict[str, Any]:
    """Latency on stores of synthetic memories. By default every synthetic user holds
    the same texts (its own memory ids and sessions), so stores of different total
    size differ only in size; ``distinct`` gives every memory its own text."""
    need = max((users if distinct else 1) * per_user for users, per_user in sizes)
    texts = synth_texts(need)
    unique = list(dict.fromkeys(t for _, t in texts))
    log(f"synthetic: {need} texts, {len(unique)} unique")
    vecs, emb = cache.encode(unique, "synthetic texts")
    by_text = dict(zip(unique, vecs, strict=True))
    out: dict[str, Any] = {}
    rng = random.Random(3)
    for users, per_user in sizes:
        label = f"synthetic {users * per_user // 1000}K"
        store_dir = CACHE / f"store-synth-{users}x{per_user}"
        log(f"{label}: {users} user(s) x {per_user} memories")
        info = build_synth_store(
            store_dir, users, per_user, texts, by_text, embedder.model_id, embedder.dim
        )
        service = MemoryService.open(store_dir, embedder=embedder, summarizer="extractive")
        probes = [
            (SYNTH_APP, f"synth-{rng.randrange(users):02d}", rng.choice(query_texts))
            for _ in range(n_probes)
        ]
        out[label] = {
            **info,
            "distinct_texts": distinct,
            "embedding": emb,
            **measure_latency(service, probes),
        }
        shutil.rmtree(store_dir, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
def quality_table(quality: dict[str, Any]) -> str:
    head = (
        f"{'mode':20s} {'queries':10s} {'n':>5s} {'R@1':>6s} {'R@5':>6s} {'R@10':>6s} "
        f"{'MRR':>6s} {'sR@1':>6s} {'sR@5':>6s} {'sR@10':>6s} {'stale@1':>7s} "
        f"{'foreign':>7s}"
    )
    lines = [head]
    for label, block in quality.items():
        rows = [("all", block["all"])] + list(block["by_kind"].items())
        for name, m in rows:
            if not m.get("n"):
                continue
            stale = f"{m['stale@1']:7.3f}" if name == "changed" else f"{'':7s}"
            lines.append(
                f"{label:20s} {name:10s} {m['n']:5d} {m['R@1']:6.3f} {m['R@5']:6.3f} "
                f"{m['R@10']:6.3f} {m['MRR']:6.3f} {m['strict_R@1']:6.3f} "
                f"{m['strict_R@5']:6.3f} {m['strict_R@10']:6.3f} {stale} "
                f"{m['foreign']:7d}"
            )
    return "\n".join(lines)


def latency_table(latency: dict[str, Any]) -> str:
    head = (
        f"{'store':14s} {'memories':>9s} {'user slice':>10s} {'mode':8s} "
        f"{'e2e p50':>8s} {'e2e p95':>8s} {'cached p50':>10s} {'search p50':>10s} "
        f"{'search p95':>10s}"
    )
    lines = [head]
    for name, block in latency.items():
        mems, per_user = block["memories"], block["per_user"]
        for mode in MODES:
            e, s = block[mode]["e2e_ms"], block[mode]["search_only_ms"]
            c = block[mode]["e2e_cached_query_ms"]
            lines.append(
                f"{name:14s} {mems:9d} {per_user:10} {mode:8s} {e['p50']:8.2f} "
                f"{e['p95']:8.2f} {c['p50']:10.2f} {s['p50']:10.2f} {s['p95']:10.2f}"
            )
    lines.append("")
    for name, block in latency.items():
        emb = block.get("embed_query_ms", {})
        cold = block["cold_first_query_hybrid_ms"]
        la = block.get("loadavg") or [None, None]
        load = f"; 1-min load {la[0][0]}->{la[1][0]}" if la[0] and la[1] else ""
        lines.append(
            f"{name:14s} query embedding p50 {emb.get('p50', float('nan')):.2f} ms, "
            f"p95 {emb.get('p95', float('nan')):.2f} ms; first hybrid query of a "
            f"user (builds its candidate set + BM25) p50 {cold['p50']:.1f} ms{load}"
        )
    return "\n".join(lines)


def readme_section(result: dict[str, Any], qtable: str, ltable: str) -> str:
    ds = result["dataset"]
    ing = result["ingest"]
    online = result.get("ingest_online_sample")
    m = result["machine"]
    kinds = ", ".join(f"{v} {k}" for k, v in ing["memories_by_kind"].items())
    emb = ing["embedding"]
    emb_note = (
        f"{emb['fresh']} texts embedded at {emb['per_s']:.0f}/s"
        if emb["fresh"]
        else "embeddings from the benchmark's cache"
    )
    if emb["fresh"] and emb["cached"]:
        emb_note += f", {emb['cached']} from the cache"
    synth = next((b for n, b in result["latency"].items() if n.startswith("synthetic")), None)
    synth_note = ""
    if synth is not None:
        synth_note = (
            " Synthetic stores: memories generated from the dataset's templates "
            "(facts, raw chunks, summaries), written with `store.write_segment`, "
            "one segment per user; "
            + (
                "every memory has its own text."
                if synth["distinct_texts"]
                else "every synthetic user holds the same texts (own ids and sessions), "
                "so the rows differ only in the store's total size."
            )
        )
    qk = ", ".join(f"{v} {k}" for k, v in ds["queries_by_kind"].items())
    lines = [
        "## Recall quality (`benchmarks/recall_quality.py`)",
        "",
        f"Generated dataset (`benchmarks/datagen.py`, seed {ds['config']['seed']}): "
        f"{ds['users']} users x {ds['config']['sessions_per_user']} sessions "
        f"({ds['events']} events) in one app; each user states ~6 facts once (pet, "
        "allergy, diet, family, job, city, hometown, hobby, trip, drink, music, car, "
        "language, health, birthday) in varied wording, 1-2 facts change in a later "
        "session, and 3 near-miss statements about other people. Queries: "
        f"{qk}. *paraphrase* queries share no index term with the stating turn, "
        "*keyword* ones share at least one, *changed* ask for the current value (answer = "
        "the newer session). Other users hold the same kinds of facts with other values.",
        "",
        f"Ingested once with the service's extractive summarizer and MiniLM: "
        f"{ing['memories']} memories ({kinds}) in {ing['total_s']:.0f} s ({emb_note}). "
        f"Every query goes through `MemoryService.search(top_k={TOP_K}, mode=...)`; the "
        "two `hybrid, ...` rows are the same store searched with "
        "`RetrievalConfig(weights={'recency': 0})` and `RetrievalConfig(recency_window=0.05)`.",
        "",
        f"*{HIT_DEFINITION}* sR@k = strict recall.",
        "",
        "```",
        qtable,
        "```",
        "",
        "Latency, in-process, ms (e2e = `MemoryService.search` for a new query, query "
        "embedding included; cached = the same query repeated, answered from the "
        "service's query-embedding cache; search = ranking given a precomputed vector, "
        "`service.retriever.search_user`). Modes are interleaved probe by probe after a "
        f"warm-up pass.{synth_note}",
        "",
        "```",
        ltable,
        "```",
        "",
    ]
    if online:
        lines += [
            f"Online ingest (`add_session`, one commit per session, first "
            f"{online['sessions']} sessions into an empty store): p50 "
            f"{online['ms_per_session_p50']:.0f} ms / session, p95 "
            f"{online['ms_per_session_p95']:.0f} ms (first tenth "
            f"{online['ms_per_session_first10pct']:.0f} ms, last tenth "
            f"{online['ms_per_session_last10pct']:.0f} ms); re-adding a session is a ledger hit "
            f"({online['ms_per_readd']:.0f} ms, {online['readded_memories']} memories "
            "written).",
            "",
        ]
    lines += [
        f"Machine: {m['cpus']} cores ({m['cpu_model']}), torch {m['torch']} with "
        f"{m['torch_threads']} threads, faiss {m['faiss']}; load average "
        f"{result['loadavg_start']} at start, {result['loadavg_end']} at the end (the "
        "machine is shared: e2e and embedding p95s move with the load, search-only "
        f"figures much less). Full run took {result['run_s'] / 60:.1f} min.",
        "",
    ]
    return "\n".join(lines)


def update_readme(section: str) -> None:
    update_section(README, "Recall quality", section)


# ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="40 users, 2K + 10K synthetic memories")
    p.add_argument("--users", type=int)
    p.add_argument("--sessions-per-user", type=int, default=10)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--synthetic",
        default=None,
        help="USERSxPER_USER,... synthetic stores (default 1x10000,10x10000)",
    )
    p.add_argument("--probes", type=int, default=300, help="latency queries per store")
    p.add_argument(
        "--online-sample",
        type=int,
        default=None,
        help="sessions ingested through add_session for the online timing "
        "(default 100, quick 50; 0: skip)",
    )
    p.add_argument("--no-readme", action="store_true")
    p.add_argument(
        "--no-ablations",
        action="store_true",
        help="skip the hybrid variants (recency off / narrower recency window)",
    )
    p.add_argument(
        "--distinct-synthetic",
        action="store_true",
        help="every synthetic memory gets its own text (embeds users x per_user "
        "texts once; default: each synthetic user holds the same texts)",
    )
    p.add_argument(
        "--no-embed-cache",
        action="store_true",
        help="embed everything afresh (ingest timings then include all embedding)",
    )
    args = p.parse_args(argv)
    started = time.perf_counter()
    users = args.users or (40 if args.quick else 200)
    synthetic = args.synthetic or ("1x2000,5x2000" if args.quick else "1x10000,10x10000")
    sizes = [tuple(int(x) for x in s.split("x")) for s in synthetic.split(",") if s]
    la_start = loadavg()
    online_n = args.online_sample if args.online_sample is not None else (50 if args.quick else 100)

    cfg = datagen.DatasetConfig(
        users=users, sessions_per_user=args.sessions_per_user, seed=args.seed
    )
    t = time.perf_counter()
    ds_dir, meta = datagen.load_or_generate(cfg, CACHE)
    log(
        f"dataset {ds_dir.name}: {meta['sessions']} sessions, {meta['events']} events, "
        f"{meta['queries']} queries {meta['queries_by_kind']} "
        f"({time.perf_counter() - t:.1f}s)"
    )
    sessions = read_archive(ds_dir / "archive")
    queries = datagen.read_jsonl(ds_dir / "queries.jsonl")

    store_dir = CACHE / f"store-{meta['fingerprint']}"
    shutil.rmtree(store_dir, ignore_errors=True)
    service = MemoryService.open(store_dir, embedder="default", summarizer="extractive")
    log(f"ingesting into {store_dir} ...")
    cache = EmbedCache(service.embedder, enabled=not args.no_embed_cache)
    ingest = ingest_batch(service, sessions, cache)
    log(
        f"ingested {ingest['memories']} memories {ingest['memories_by_kind']} in "
        f"{ingest['total_s']}s"
    )

    runs = [(mode, service, mode) for mode in MODES]
    if not args.no_ablations:
        for label, cfg_ in (
            ("hybrid, recency off", RetrievalConfig(weights={"recency": 0.0})),
            ("hybrid, window 0.05", RetrievalConfig(recency_window=0.05)),
        ):
            runs.append(
                (
                    label,
                    MemoryService(service.store, service.embedder, service.summarizer, cfg_),
                    "hybrid",
                )
            )
    log(f"evaluating {len(queries)} queries x {len(runs)} configurations (top {TOP_K})")
    quality = evaluate(runs, queries)

    log("latency: dataset store")
    rng = random.Random(11)
    probes = [
        (q["app_name"], q["user_id"], q["query"])
        for q in rng.sample(queries, min(args.probes, len(queries)))
    ]
    dataset_latency = measure_latency(service, probes)
    snap = service.snapshot()
    slice_sizes = [snap.count(cfg.app_name, u) for u in sorted({q["user_id"] for q in queries})]
    latency = {
        "dataset": {
            "memories": ingest["memories"],
            "per_user": round(statistics.mean(slice_sizes)),
            **dataset_latency,
        }
    }
    latency.update(
        synthetic_latency(
            service.embedder,
            cache,
            sizes,
            [q["query"] for q in queries],
            args.probes,
            args.distinct_synthetic,
        )
    )

    online = None
    if online_n:
        log(f"online ingest: add_session x {online_n}")
        online = ingest_online_sample(sessions, CACHE / "store-online-sample", online_n)
        log(f"  {online}")

    result = {
        "benchmark": "recall_quality",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": {
            "quick": args.quick,
            "top_k": TOP_K,
            "modes": list(MODES),
            "retrieval": _config_dict(service.config),
            "embedder": service.embedder.model_id,
            "summarizer": service.summarizer.name,
            "chunk_turns": service.chunk_turns,
            "synthetic": [f"{u}x{n}" for u, n in sizes],
            "probes": args.probes,
        },
        "hit_definition": HIT_DEFINITION,
        "dataset": {
            **{
                k: meta[k]
                for k in (
                    "fingerprint",
                    "users",
                    "sessions",
                    "events",
                    "queries",
                    "queries_by_kind",
                    "facts_by_role",
                )
            },
            "config": meta["config"],
        },
        "ingest": ingest,
        "ingest_online_sample": online,
        "quality": quality,
        "latency": latency,
        "machine": machine_info(),
        "loadavg_start": la_start,
        "loadavg_end": loadavg(),
    }
    result["run_s"] = round(time.perf_counter() - started, 1)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2, default=float) + "\n")

    qtable, ltable = quality_table(quality), latency_table(latency)
    print()
    print(
        f"Recall quality: {meta['users']} users, {meta['sessions']} sessions, "
        f"{ingest['memories']} memories {ingest['memories_by_kind']}, "
        f"{meta['queries']} queries {meta['queries_by_kind']}"
    )
    print(HIT_DEFINITION)
    print(qtable)
    print()
    print(ltable)
    print(f"\nwrote {RESULTS.relative_to(HERE.parent)} (run {result['run_s'] / 60:.1f} min)")
    if not args.no_readme:
        update_readme(readme_section(result, qtable, ltable))
        print(f"updated {README.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
