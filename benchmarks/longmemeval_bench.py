"""Recall on LongMemEval's real chat histories, scored strictly.

1. Data: ``shared/data/longmemeval_dev.json`` beside the repo (``--data``): questions of
   LongMemEval_S, each with its own user's haystack of about 48 dated sessions, turned
   into sessions by ``benchmarks/longmemeval_data.py``.
2. Ingest: every haystack as its own user of app ``lme``, its sessions in date order
   through ``MemoryService.add_session`` (the default extractive summarizer and the
   packaged MiniLM; one commit per session), into a store cached under
   ``benchmarks/.cache/longmemeval-<fingerprint>/`` and reused by later runs (a run
   that stops part-way resumes there; ``--rebuild`` starts afresh).
3. Recall: every question through ``MemoryService.recall`` as of its ``question_date``,
   top 50, in each mode, and ``hybrid`` with ``budget_tokens`` 1000 (what a reader
   given 1,000 tokens of memory gets); a baseline ranks single turns with mnemoray's own BM25
   (``longconv_bench.TurnBM25``), scored the same way.

Run: ``.venv/bin/python benchmarks/longmemeval_bench.py`` (all questions) or
``--limit N`` (N questions, every type in turn). Prints a table, writes
``benchmarks/results/longmemeval.json`` and the "LongMemEval" section of
``benchmarks/results/HISTORY.md`` (the run log).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The repo root, so that `python benchmarks/longmemeval_bench.py` imports like `-m`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import longmemeval_data as lme  # noqa: E402
from benchmarks.history import update_section  # noqa: E402
from benchmarks.longconv_bench import (  # noqa: E402
    Item,
    TurnBM25,
    commit_info,
    log,
    machine_info,
    questions_path,
    write_results,
)
from mnemoray.memory.service.service import MemoryService  # noqa: E402
from mnemoray.text import terms  # noqa: E402
from mnemoray.tokens import count_tokens  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data" / "longmemeval_dev.json"
CACHE = HERE / ".cache"
RESULTS = HERE / "results" / "longmemeval.json"
HISTORY = HERE / "results" / "HISTORY.md"
HEADING = "LongMemEval"
MODES = ("hybrid", "dense", "keyword")
BASELINE = "BM25, single turns"
# Bump when the sessions built from the data or the way they are ingested change: the
# cached store is then rebuilt.
INGEST_VERSION = 5
TOP_K = 50  # deep enough for 10 distinct sessions
SESSION_KS = (5, 10)
TURN_K = 10
TOKEN_BUDGET = 1000
BUDGETED = f"hybrid, {TOKEN_BUDGET} tokens"  # recall with budget_tokens
HOLD_SHARE = 0.5

SCORING = (
    "Session recall: S@k = some answer session is among the first k distinct sessions "
    "the recalled items come from (LongMemEval's turn-to-session scoring), allS@10 = "
    f"every answer session is; top {TOP_K} items. Strict turn recall: an evidence turn "
    "(has_answer) is recalled by an item only if the item's provenance "
    f"(source_event_ids) cites that turn AND its text holds at least {HOLD_SHARE:.0%} of "
    "the turn's distinct content terms (mnemoray.text.terms: stopwords dropped, light "
    f"stemming); T@{TURN_K} = share of the question's evidence turns recalled by what a "
    f"recall of the top {TURN_K} returns (a long turn's parts joined into one passage "
    f"count as that many), T@1K = share recalled within the first {TOKEN_BUDGET} tokens of "
    "recalled text (mnemoray.tokens.count_tokens, items concatenated in rank order, a "
    "turn counted where its words end in the item, else where the item ends); tokens = "
    f"mean tokens of the top {TURN_K}. Figures are means over questions."
)


# ---------------------------------------------------------------------------
# Strict scoring
# ---------------------------------------------------------------------------
def item_sessions(items: Sequence[Item], turns: dict[str, lme.Turn]) -> list[str]:
    """The distinct sessions the items come from, in rank order (an item's cited events
    are all of one session; one citing none of the haystack's is left out)."""
    seen: dict[str, None] = {}
    for it in items:
        sid = next((turns[e].session_id for e in sorted(it.sources) if e in turns), None)
        if sid is not None:
            seen.setdefault(sid)
    return list(seen)


def holds_turn(have: set[str], turn_terms: set[str]) -> bool:
    """Whether an item with terms ``have`` holds enough of a turn's content terms."""
    return not turn_terms or len(turn_terms & have) / len(turn_terms) >= HOLD_SHARE


def judge(
    hay: lme.Haystack, items: Sequence[Item], top: Sequence[Item] | None = None
) -> dict[str, Any]:
    """Session recall over distinct sessions; per evidence turn, the first rank that
    recalls it strictly and whether that is inside the token budget. ``top``: what a
    recall of the top 10 returned (T@10 and tokens; default the first 10 ``items``)."""
    sessions = item_sessions(items, hay.turns)
    answers = hay.answer_sessions
    out: dict[str, Any] = {"qid": hay.question_id, "type": hay.question_type}
    for k in SESSION_KS:
        out[f"S@{k}"] = float(any(s in answers for s in sessions[:k]))
    k = SESSION_KS[-1]
    out[f"allS@{k}"] = float(bool(answers) and answers <= set(sessions[:k]))
    starts = [0]  # tokens of recalled text before each item, as far as the budget
    for it in items:
        if starts[-1] > TOKEN_BUDGET:
            break
        starts.append(starts[-1] + count_tokens(it.text))
    item_terms: dict[int, set[str]] = {}
    ranks: list[int | None] = []
    in_budget: list[bool] = []
    for eid in hay.evidence:
        turn = hay.turns[eid]
        want = set(terms(turn.text))
        rank, within = None, False
        for r, it in enumerate(items, start=1):
            if eid not in it.sources:
                continue
            have = item_terms.setdefault(r, set(terms(it.text)))
            if not holds_turn(have, want):
                continue
            rank = rank or r
            if r <= len(starts):  # its start is counted (else it lies past the budget)
                said = turn.text.strip()
                pos = it.text.find(said)
                upto = it.text if pos < 0 else it.text[: pos + len(said)]
                within = within or starts[r - 1] + count_tokens(upto) <= TOKEN_BUDGET
            if within:
                break
        ranks.append(rank)
        in_budget.append(within)
    n = len(ranks)
    top = list(items[:TURN_K]) if top is None else list(top)
    out["ranks"] = ranks
    out[f"T@{TURN_K}"] = (
        sum(
            any(eid in it.sources and holds_turn(set(terms(it.text)), want) for it in top)
            for eid, want in ((e, set(terms(hay.turns[e].text))) for e in hay.evidence)
        )
        / n
        if n
        else None
    )
    out[f"T@{TOKEN_BUDGET}"] = sum(in_budget) / n if n else None
    out["tokens_top10"] = sum(count_tokens(it.text) for it in top)
    out["kinds_top10"] = dict(Counter(it.kind for it in top))
    return out


METRICS = (
    *(f"S@{k}" for k in SESSION_KS),
    f"allS@{SESSION_KS[-1]}",
    f"T@{TURN_K}",
    f"T@{TOKEN_BUDGET}",
    "tokens_top10",
)


def summarize(judged: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(judged)}
    for key in METRICS:
        values = [j[key] for j in judged if j[key] is not None]
        out[key] = round(sum(values) / len(values), 4) if values else None
    kinds: Counter[str] = Counter()
    for j in judged:
        kinds.update(j["kinds_top10"])
    out["kinds_top10"] = dict(sorted(kinds.items()))
    return out


def by_type(judged: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out = {"all": summarize(judged)}
    for t in sorted({j["type"] for j in judged}):
        out[t] = summarize([j for j in judged if j["type"] == t])
    return out


# ---------------------------------------------------------------------------
# Store (built once, cached)
# ---------------------------------------------------------------------------
def fingerprint(data_sha: str) -> str:
    from hashlib import sha256

    key = json.dumps(
        {
            "data": data_sha,
            "ingest": INGEST_VERSION,
            "mnemoray": importlib.metadata.version("mnemoray"),
        },
        sort_keys=True,
    )
    return sha256(key.encode()).hexdigest()[:12]


def read_ingested(path: Path) -> dict[str, Any]:
    """What the cached store holds: per question, its ingestion figures."""
    if not path.exists():
        return {}
    found: dict[str, Any] = json.loads(path.read_text())
    return found


def write_ingested(path: Path, done: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(done, indent=1) + "\n")
    tmp.replace(path)  # whole or not at all: a stop here loses no earlier question


def ingest(
    service: MemoryService, hays: Sequence[lme.Haystack], ledger: Path
) -> dict[str, dict[str, Any]]:
    """Ingest every haystack the cache lacks; returns each haystack's ingestion figures
    (from the run that ingested it). A haystack stopped part-way is finished: the store's
    ledger skips the sessions already committed."""
    done = read_ingested(ledger)
    todo = [h for h in hays if h.question_id not in done]
    if todo:
        log(f"ingesting {len(todo)} haystacks ({sum(len(h.sessions) for h in todo)} sessions)")
    t_all = time.perf_counter()
    for n, hay in enumerate(todo, start=1):
        t0 = time.perf_counter()
        ms: list[float] = []
        for s in hay.sessions:
            t = time.perf_counter()
            service.add_session(s)
            ms.append(round((time.perf_counter() - t) * 1000, 1))
        rows = service.snapshot().rows_for_user(lme.APP, hay.user_id)
        done[hay.question_id] = {
            "sessions": len(hay.sessions),
            "turns": len(hay.turns),
            "chars": sum(len(t.text) for t in hay.turns.values()),
            "memories": len(rows),
            "memories_by_kind": dict(sorted(Counter(m.kind for m in rows).items())),
            "s": round(time.perf_counter() - t0, 1),
            "ms_per_session": ms,
        }
        write_ingested(ledger, done)
        elapsed = time.perf_counter() - t_all
        log(
            f"  {n}/{len(todo)} {hay.question_id}: {len(hay.sessions)} sessions, "
            f"{len(rows)} memories in {done[hay.question_id]['s']}s "
            f"(so far {elapsed / 60:.1f} min, about "
            f"{elapsed / n * (len(todo) - n) / 60:.0f} min to go)"
        )
    return {h.question_id: done[h.question_id] for h in hays}


def ingest_summary(per_question: dict[str, dict[str, Any]]) -> dict[str, Any]:
    figures = list(per_question.values())
    ms = sorted(x for f in figures for x in f["ms_per_session"])
    kinds: Counter[str] = Counter()
    for f in figures:
        kinds.update(f["memories_by_kind"])
    return {
        "path": "MemoryService.add_session, one commit per session",
        "questions": len(figures),
        "sessions": sum(f["sessions"] for f in figures),
        "turns": sum(f["turns"] for f in figures),
        "chars": sum(f["chars"] for f in figures),
        "memories": sum(kinds.values()),
        "memories_by_kind": dict(sorted(kinds.items())),
        "total_s": round(sum(f["s"] for f in figures), 1),
        "ms_per_session_p50": ms[len(ms) // 2] if ms else None,
        "ms_per_session_p95": ms[int(len(ms) * 0.95)] if ms else None,
    }


# ---------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------
def scored(judged: list[dict[str, Any]], t0: float) -> dict[str, Any]:
    return {
        "by_type": by_type(judged),
        "eval_s": round(time.perf_counter() - t0, 1),
        "judged": judged,
    }


def run_mode(
    service: MemoryService, hays: Sequence[lme.Haystack], mode: str, budget: int | None = None
) -> dict[str, Any]:
    """Every question recalled in ``mode``; ``budget``: with ``budget_tokens`` (what a
    reader given that many tokens of memory gets)."""
    t0 = time.perf_counter()
    judged = []
    for hay in hays:
        # The top 10 are what a recall of 10 returns: a long turn's parts joined into one
        # passage count as that many of them (mnemoray.memory.recall.picking).
        found = [
            [
                Item(r.memory.text, frozenset(r.memory.source_event_ids), r.memory.kind)
                for r in service.recall(
                    service.resolve(
                        lme.APP,
                        hay.user_id,
                        hay.question,
                        k,
                        mode=mode,
                        now=hay.asked_at,
                        budget_tokens=budget,
                    )
                )
            ]
            for k in (TOP_K, TURN_K)
        ]
        judged.append(judge(hay, found[0], found[1]))
    return scored(judged, t0)


def run_turn_bm25(hays: Sequence[lme.Haystack]) -> dict[str, Any]:
    t0 = time.perf_counter()
    index = TurnBM25(s for h in hays for s in h.sessions)
    judged = [judge(h, index.top(h.user_id, h.question, TOP_K)) for h in hays]
    return scored(judged, t0)


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
def table(quality: dict[str, Any]) -> str:
    cols = ("S@5", "S@10", "allS@10", f"T@{TURN_K}", f"T@{TOKEN_BUDGET}")
    heads = ("S@5", "S@10", "allS@10", "T@10", "T@1K")
    lines = [
        f"{'run':20s} {'questions':25s} {'n':>3s} "
        + " ".join(f"{h:>7s}" for h in heads)
        + f" {'tokens':>6s}"
    ]
    for label, block in quality.items():
        for name, m in block["by_type"].items():
            cells = " ".join(f"{'-':>7s}" if m[c] is None else f"{m[c]:7.3f}" for c in cols)
            lines.append(f"{label:20s} {name:25s} {m['n']:3d} {cells} {m['tokens_top10']:6.0f}")
    return "\n".join(lines)


def history_section(result: dict[str, Any], tbl: str) -> str:
    ds, ing, m = result["dataset"], result["ingest"], result["machine"]
    types = ", ".join(f"{v} {k}" for k, v in ds["questions_by_type"].items())
    kinds = ", ".join(f"{v} {k}" for k, v in ing["memories_by_kind"].items())
    return "\n".join(
        [
            f"## {HEADING} (`benchmarks/longmemeval_bench.py`)",
            "",
            f"LongMemEval_S development split (`shared/data/longmemeval_dev.json`, sha256 "
            f"{ds['sha256'][:8]}): {ds['questions']} questions ({types}), each its own "
            f"user's haystack; {ing['sessions']} sessions, {ing['turns']} turns, "
            f"{ing['chars'] / 1e6:.1f} M characters.",
            "",
            f"Ingested with `MemoryService.add_session` (extractive summarizer, "
            f"{result['config']['embedder']}, the shipped defaults): {ing['memories']} "
            f"memories ({kinds}) in {ing['total_s'] / 60:.0f} min "
            f"(p50 {ing['ms_per_session_p50']:.0f} ms per session). Every question goes "
            f"through `MemoryService.recall(top_k={TOP_K}, mode=..., now=question_date)`; "
            f"`{BASELINE}` ranks single turns with mnemoray's BM25 and is scored the "
            "same way.",
            "",
            f"*{SCORING}*",
            "",
            "```",
            tbl,
            "```",
            "",
            f"Machine: {m['cpus']} cores ({m['cpu_model']}), shared; commit "
            f"{result['commit']['sha'][:10]}{' (dirty tree)' if result['commit']['dirty'] else ''}"
            f". Recall and scoring took {result['eval_s'] / 60:.1f} min.",
            "",
        ]
    )


# ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DATA, help="the LongMemEval questions (JSON)")
    p.add_argument("--limit", type=int, help="the first N questions, every type in turn")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated search modes")
    p.add_argument("--no-baseline", action="store_true", help="skip BM25 over single turns")
    p.add_argument("--rebuild", action="store_true", help="ingest afresh into a new store")
    p.add_argument("--cache", type=Path, default=CACHE, help="root of the cached store")
    p.add_argument("--out", type=Path, default=RESULTS, help="results JSON")
    p.add_argument("--history", type=Path, default=HISTORY, help="the run log to update")
    p.add_argument("--no-history", action="store_true")
    args = p.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        p.error(f"--modes: expected some of {', '.join(MODES)}, got {args.modes!r}")
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be >= 1")
    if not args.data.is_file():
        print(
            f"longmemeval_bench: no data file {args.data} (give one with --data)", file=sys.stderr
        )
        return 2
    started = time.perf_counter()

    sha = lme.file_sha256(args.data)
    items = lme.load(args.data)
    if args.limit:
        items = lme.stratified(items, args.limit)
    hays = [lme.haystack(it) for it in items]
    log(
        f"{len(hays)} questions, {sum(len(h.sessions) for h in hays)} sessions "
        f"from {args.data} (sha256 {sha[:8]})"
    )

    cache_dir = args.cache / f"longmemeval-{fingerprint(sha)}"
    if args.rebuild:
        shutil.rmtree(cache_dir, ignore_errors=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    service = MemoryService.open(cache_dir / "store", embedder="default", summarizer="extractive")
    assert service.embedder is not None
    log(f"store {cache_dir} (embedder: {service.embedder.model_id})")
    ing = ingest_summary(ingest(service, hays, cache_dir / "ingested.json"))
    log(f"store holds {ing['memories']} memories {ing['memories_by_kind']} ({ing['total_s']}s)")

    t_eval = time.perf_counter()
    quality: dict[str, Any] = {}
    for mode in modes:
        quality[mode] = run_mode(service, hays, mode)
        a = quality[mode]["by_type"]["all"]
        log(
            f"  {mode:8s} S@5 {a['S@5']:.3f} S@10 {a['S@10']:.3f} T@10 {a['T@10']:.3f} "
            f"({quality[mode]['eval_s']}s)"
        )
    if "hybrid" in modes:
        quality[BUDGETED] = run_mode(service, hays, "hybrid", TOKEN_BUDGET)
    if not args.no_baseline:
        quality[BASELINE] = run_turn_bm25(hays)
    judged = {label: block.pop("judged") for label, block in quality.items()}

    result = {
        "benchmark": "longmemeval",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit_info(),
        "machine": machine_info(),
        "config": {
            "limit": args.limit,
            "top_k": TOP_K,
            "session_ks": list(SESSION_KS),
            "turn_k": TURN_K,
            "token_budget": TOKEN_BUDGET,
            "hold_share": HOLD_SHARE,
            "modes": modes,
            "embedder": service.embedder.model_id,
            "summarizer": service.summarizer.name,
            "chunk_turns": service.chunk_turns,
            "retrieval": {
                "weights": dict(service.config.weights),
                "recency_window": service.config.recency_window,
            },
        },
        "scoring": SCORING,
        "dataset": {
            "file": args.data.name,
            "sha256": sha,
            "questions": len(hays),
            "questions_by_type": dict(sorted(Counter(h.question_type for h in hays).items())),
            "evidence_turns": sum(len(h.evidence) for h in hays),
        },
        "store": {"dir": cache_dir.name, "fingerprint": fingerprint(sha)},
        "ingest": ing,
        "quality": quality,
        "per_question_file": questions_path(args.out).name,
    }
    service.close()
    result["eval_s"] = round(time.perf_counter() - t_eval, 1)
    result["run_s"] = round(time.perf_counter() - started, 1)
    write_results(args.out, result, judged)

    tbl = table(quality)
    print()
    print(SCORING)
    print(tbl)
    print(f"\nwrote {args.out} (run {result['run_s'] / 60:.1f} min)")
    if not args.no_history:
        update_section(args.history, HEADING, history_section(result, tbl))
        print(f"updated {args.history}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
