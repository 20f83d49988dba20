"""CPU of materialising stored records: segment rows -> ``Memory`` (Serve's hot path).

``rows_to_memories`` builds the records recall returns (``Candidates.memories``: the top
records of each recall) and the records the store's write path rewrites. Two measures:

- ``micro`` (default): CPU per call (``time.process_time``) of ``rows_to_memories``
  against :func:`rows_to_memories_take`, the code before (``Table.take(rows).to_pylist()``),
  interleaved in one process, on tables laid out as the store holds them: a segment of
  100,000 rows written with ``ROW_GROUP_SIZE`` row groups and read back memory-mapped (two
  chunks), one of 20,000 rows (one chunk, as the 1M store's segments), and one of 20,000
  rows in 40 chunks (a concatenation, as a Lance view's); row sets of 1 to 10,000 rows,
  random, and a user's whole contiguous range. Results equal the code before's (checked).
- ``--recall``: in-process recall CPU over a store (default: serve_bench's cached 1M store):
  ``MemoryOps.op_recall`` with the query vector given, round robin over ``--users`` users,
  each recall a query not sent before; candidate sets warmed and their time passes done
  first. For a before/after pair run it once per checkout, interleaved, the older one with
  ``PYTHONPATH=<worktree>`` from the worktree's directory (the script prints which
  ``mnemoray`` it ran). The digest of the results must be the same.

    .venv/bin/python -m benchmarks.records_bench
    cd /tmp/before && PYTHONPATH=$PWD /work/main/.venv/bin/python \\
        /work/main/benchmarks/records_bench.py --recall --label before

Prints a table; writes ``benchmarks/results/records_bench.json`` (appended per run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "records_bench.json"
if __package__ in (None, ""):  # run as a script (the before/after recall pair): import ours
    sys.path.append(str(HERE.parent))

from benchmarks.machine import machine  # noqa: E402

Rows = Sequence[int] | np.ndarray
RowsFn = Callable[[Any, Rows, "np.ndarray | None"], list]


def rows_to_memories_take(table: Any, rows: Rows, vectors: np.ndarray | None) -> list:
    """The code before (8f1d537), kept as the reference: one ``Table.take`` of the rows,
    ``to_pylist``, then a record per row dict."""
    from mnemoray.memory.records.record import Memory, MemoryVersion
    from mnemoray.memory.store.rows import LIST_FIELDS, VERSIONS

    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return []
    out = []
    for row, raw in zip(rows, table.take(rows).to_pylist(), strict=True):
        for name in LIST_FIELDS:
            raw[name] = tuple(raw[name] or ())
        raw[VERSIONS] = tuple(MemoryVersion.from_dict(v) for v in raw[VERSIONS] or ())
        raw["agent_name"] = raw["agent_name"] or ""
        embedding = None if vectors is None else np.array(vectors[row], dtype=np.float32)
        out.append(Memory.stored(raw, embedding))
    return out


# -- micro ---------------------------------------------------------------------------------
WORDS = (
    "moved",
    "Berlin",
    "Oslo",
    "parrot",
    "grey",
    "whale",
    "Mel",
    "Max",
    "said",
    "booked",
    "dentist",
    "sourdough",
    "club",
    "Tuesday",
    "marathon",
    "sister",
    "flat",
    "rent",
    "piano",
    "lesson",
)


def memories(n: int, users: int, seed: int) -> list:
    """``n`` records of ``users`` users with every column filled in some rows: lists,
    nulls, an edit history, agent scopes."""
    from mnemoray.memory.records.record import Memory, MemoryVersion

    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = " ".join(rng.choices(WORDS, k=rng.randint(6, 40)))
        out.append(
            Memory(
                "bench",
                f"u{i * users // n:04d}",
                f"s{i // 5}",
                "session_summary" if i % 3 else "chunk",
                text,
                source_event_ids=tuple(f"e{i}-{j}" for j in range(rng.randint(1, 4))),
                topics=tuple(rng.sample(WORDS, 2)),
                key_facts=(text[:30],) if i % 2 else (),
                entities=tuple(rng.sample(WORDS, rng.randint(0, 3))),
                event_time_start=1.7e9 + 3600 * i,
                event_time_end=1.7e9 + 3600 * i + 600,
                created_at=1.7e9 + 3600 * i,
                expires_at=None if i % 7 else 2e9 + i,
                session_events=i % 9 or None,
                session_updated_at=1.7e9 + i if i % 2 else None,
                open_threads=("call back",) if i % 11 == 0 else (),
                edited_at=1.8e9 if i % 50 == 0 else None,
                edited_by="ops" if i % 50 == 0 else None,
                previous_versions=(MemoryVersion("old", "the old words", 1.7e9, "ops"),)
                if i % 50 == 0
                else (),
                agent_name="planner" if i % 13 == 0 else "",
            )
        )
    return out


def segment_tables(workdir: Path) -> dict[str, Any]:
    """name -> table, each read back as ``LoadedSegment.load`` reads a segment."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mnemoray.memory.store.rows import memories_to_table, memory_schema
    from mnemoray.memory.store.segment import ROW_GROUP_SIZE

    out = {}
    for n in (100_000, 20_000):
        table = memories_to_table(memories(n, n // 10_000, seed=n), 0)
        path = workdir / f"seg{n}.parquet"
        pq.write_table(table, path, compression="zstd", row_group_size=ROW_GROUP_SIZE)
        columns = [f.name for f in memory_schema(0)]
        out[n] = pq.read_table(path, memory_map=True, columns=columns)
    big, small = out[100_000], out[20_000]
    return {
        f"100k rows, {big['memory_id'].num_chunks} chunks": big,
        "20k rows, 1 chunk": small,
        "20k rows, 40 chunks": pa.concat_tables(
            [small.slice(i, 500) for i in range(0, 20_000, 500)]
        ),
    }


def row_sets(n_rows: int, k: int, rng: np.random.Generator, kind: str) -> list[np.ndarray]:
    count = max(4, min(200, 2_000 // k))
    if kind == "contiguous":  # a user's range (snapshot.memories, the store's rewrite)
        starts = rng.integers(0, n_rows - k, count)
        return [np.arange(s, s + k) for s in starts]
    return [rng.integers(0, n_rows, k) for _ in range(count)]


def cpu_us(fn: RowsFn, table: Any, sets: list[np.ndarray], vectors: np.ndarray) -> float:
    start = time.process_time()
    for rows in sets:
        fn(table, rows, vectors)
    return (time.process_time() - start) / len(sets) * 1e6


def same(a: list, b: list) -> bool:
    """Every field of every record, in the same order, of the same type; embeddings equal."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if list(x.__dict__) != list(y.__dict__):
            return False
        for name, value in x.__dict__.items():
            other = y.__dict__[name]
            if name == "embedding" and (value is not None or other is not None):
                if (
                    value is None
                    or other is None
                    or value.dtype != other.dtype
                    or value.shape != other.shape
                    or value.tobytes() != other.tobytes()
                ):
                    return False
            elif type(value) is not type(other) or value != other:
                return False
    return True


def micro(repeats: int, seed: int) -> list[dict[str, Any]]:
    from mnemoray.memory.store.rows import rows_to_memories

    rng = np.random.default_rng(seed)
    cases = [
        (1, "random"),
        (5, "random"),
        (10, "random"),
        (20, "random"),
        (50, "random"),
        (1000, "random"),
        (10_000, "contiguous"),
    ]
    out = []
    with tempfile.TemporaryDirectory(prefix="records-bench-") as tmp:
        tables = segment_tables(Path(tmp))
        vectors = rng.standard_normal((100_000, 384)).astype(np.float32)
        for k, kind in cases:
            for name, table in tables.items():
                sets = row_sets(table.num_rows, k, rng, kind)
                assert all(
                    same(
                        rows_to_memories(table, s, vectors),
                        rows_to_memories_take(table, s, vectors),
                    )
                    for s in sets[:3]
                )
                before, after = [], []
                for _ in range(repeats):  # interleaved
                    before.append(cpu_us(rows_to_memories_take, table, sets, vectors))
                    after.append(cpu_us(rows_to_memories, table, sets, vectors))
                row = {
                    "rows": k,
                    "kind": kind,
                    "table": name,
                    "calls": len(sets) * repeats,
                    "before_us": round(float(np.median(before)), 1),
                    "after_us": round(float(np.median(after)), 1),
                }
                row["ratio"] = round(row["before_us"] / row["after_us"], 2)
                out.append(row)
                print(
                    f"| {k} ({kind}) | {name} | {row['before_us']:.1f} | "
                    f"{row['after_us']:.1f} | {row['ratio']:.2f}x |",
                    flush=True,
                )
    return out


# -- recall --------------------------------------------------------------------------------
def query_vectors(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    """serve_bench's queries (``n`` not sent before) and their ONNX vectors, cached so the
    before and after runs search with the same vectors."""
    from benchmarks import serve_bench as sb

    texts = sb.make_queries(n, seed)
    path = HERE / ".cache" / f"records-queries-{n}-{seed}.npy"
    if path.is_file():
        return texts, np.load(path)
    from mnemoray.embedders import open_embedder

    embedder = open_embedder("onnx")
    assert embedder is not None
    vecs = np.asarray(embedder.encode(texts), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return texts, vecs


def default_store() -> Path:
    found = sorted((HERE / ".cache" / "stores" / "1m").glob("*/store"))
    if not found:
        raise SystemExit("no cached 1M store: run benchmarks/serve_bench.py --sizes 1m once")
    return found[0]


def recall(store: Path, users: int, n: int, warm: int, seed: int) -> dict[str, Any]:
    import mnemoray
    from benchmarks import serve_bench as sb
    from mnemoray.embedders import open_embedder
    from mnemoray.memory.recall import candidates
    from mnemoray.memory.service.json_ops import MemoryOps
    from mnemoray.memory.service.service import MemoryService
    from mnemoray.memory.store.parquet.store import MemoryStore
    from mnemoray.summarizers import get_summarizer

    texts, vecs = query_vectors(warm + n, seed)
    spent = {"calls": 0, "rows": 0, "cpu_s": 0.0}
    inner = candidates.rows_to_memories

    def timed(table: Any, rows: Rows, vectors: np.ndarray | None) -> list:
        """What a recall spends materialising its records (Candidates._build)."""
        start = time.process_time()
        try:
            return inner(table, rows, vectors)
        finally:
            spent["cpu_s"] += time.process_time() - start
            spent["calls"] += 1
            spent["rows"] += len(rows)

    candidates.rows_to_memories = timed  # type: ignore[assignment]
    service = MemoryService(MemoryStore(store), open_embedder("onnx"), get_summarizer("extractive"))
    ops = MemoryOps(service)
    names = [f"u{u:04d}" for u in range(users)]
    snap = service.snapshot()
    for i, user in enumerate(names):  # build each set, start and finish its time pass
        ops.op_recall(sb.APP, user, "what did I do last week", vecs[i], sb.TOP_K, snap=snap)
        service.retriever_for(sb.APP).user_candidates(snap, sb.APP, user).times_resolved()
    for i in range(warm):
        ops.op_recall(sb.APP, names[i % users], texts[i], vecs[i], sb.TOP_K, snap=snap)
    digest = hashlib.sha256()
    spent.update(calls=0, rows=0, cpu_s=0.0)
    cpu0, wall0, thread0 = time.process_time(), time.perf_counter(), time.thread_time()
    for i in range(warm, warm + n):
        out = ops.op_recall(sb.APP, names[i % users], texts[i], vecs[i], sb.TOP_K, snap=snap)
        digest.update(json.dumps(out, sort_keys=True).encode())
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    thread = time.thread_time() - thread0
    return {
        "mnemoray": str(Path(mnemoray.__file__).parent),
        "store": str(store),
        "users": users,
        "recalls": n,
        "cpu_ms_per_recall": round(1e3 * cpu / n, 3),
        "thread_cpu_ms_per_recall": round(1e3 * thread / n, 3),
        "wall_ms_per_recall": round(1e3 * wall / n, 3),
        "materialise_ms_per_recall": round(1e3 * spent["cpu_s"] / n, 4),
        "materialise_calls": spent["calls"],
        "materialised_rows": spent["rows"],
        "materialise_us_per_call": round(1e6 * spent["cpu_s"] / max(1, spent["calls"]), 1),
        "digest": digest.hexdigest()[:16],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--recall", action="store_true", help="in-process recall CPU instead")
    p.add_argument("--store", type=Path, default=None, help="--recall: the store (default 1M)")
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--recalls", type=int, default=400)
    p.add_argument("--warm", type=int, default=100, help="--recall: untimed recalls first")
    p.add_argument("--repeats", type=int, default=5, help="micro: interleaved rounds")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--label", default="")
    p.add_argument("--note", default="", help="recorded with the results (the machine's state)")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    result: dict[str, Any] = {"label": args.label, "note": args.note, "machine_start": machine()}
    if args.recall:
        result["recall"] = recall(
            args.store or default_store(), args.users, args.recalls, args.warm, args.seed
        )
        print(json.dumps(result["recall"], indent=1))
    else:
        print(
            "| rows | table | before us / call (CPU) | after | before / after |\n"
            "|---|---|---|---|---|"
        )
        result["micro"] = micro(args.repeats, args.seed)
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"machine {result['machine_start']['cpu_model']}, {result['machine_start']['cpus']} "
        f"CPUs; load average start {result['machine_start']['loadavg']}, end "
        f"{result['load_average_end']}"
    )
    append_result(args.out, result)
    return 0


def append_result(path: Path, result: dict[str, Any]) -> None:
    """Add ``result`` to the ``results`` list of the JSON file at ``path``."""
    stored = json.loads(path.read_text()) if path.exists() else {"results": []}
    stored["results"].append(result)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stored, indent=1) + "\n")
    print(f"appended to {path}")


if __name__ == "__main__":
    raise SystemExit(main())
