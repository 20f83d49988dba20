"""Recall on long two-person conversations, scored strictly.

1. Dataset: ``benchmarks/longconv_data.py`` (pairs of named speakers, 20+ dated
   sessions each, evidence-annotated questions of four kinds plus changed-fact
   probes), cached under ``benchmarks/.cache/longconv-<fingerprint>/``.
2. Ingest: every session through ``MemoryService.add_session`` (the default
   extractive summarizer and the packaged MiniLM; one commit per session) into
   a fresh store, one per run.
3. Recall: every question through ``MemoryService.search(top_k=10)`` in each
   mode; a baseline ranks single turns with mnemoray's own BM25 (one document
   per turn, ``[date] Speaker: text``), scored the same way.

Run: ``.venv/bin/python benchmarks/longconv_bench.py`` (10 pairs x 24 sessions)
or ``--quick`` (2 pairs x 20 sessions). Prints a table, writes
``benchmarks/results/longconv.json`` and the "Long conversations" section of
``benchmarks/results/HISTORY.md`` (the run log).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The repo root, so that `python benchmarks/longconv_bench.py` imports like `-m`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import longconv_data as data  # noqa: E402
from benchmarks.history import update_section  # noqa: E402
from mnemoray.backfill.archive import read_archive  # noqa: E402
from mnemoray.memory.recall.bm25 import BM25  # noqa: E402
from mnemoray.memory.service.service import MemoryService  # noqa: E402
from mnemoray.sessions.events import iso  # noqa: E402
from mnemoray.sessions.session import Session  # noqa: E402
from mnemoray.text import terms  # noqa: E402
from mnemoray.tokens import count_tokens  # noqa: E402

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
RESULTS = HERE / "results" / "longconv.json"
# The run log; benchmarks/README.md keeps the current figures (one table row, by hand).
README = HERE / "results" / "HISTORY.md"
MODES = ("keyword", "dense", "hybrid")
BASELINE = "BM25, single turns"
PROBE = "probe: 3-turn RRF"
WINDOW, STRIDE, RRF_K = 3, 2, 60  # the probe: 3-turn windows, overlap 1
TOP_K = 10
TOKEN_BUDGET = 1000
HOLD_SHARE = 0.6
MAIN_KINDS = data.KINDS[:4]

SCORING = (
    "An evidence turn is recalled by an item only if the item's provenance "
    "(source_event_ids) cites that turn AND the item's text holds its words: at least "
    f"{HOLD_SHARE:.0%} of the distinct content terms of the sentence that states the fact "
    "(mnemoray.text.terms: stopwords dropped, light stemming) and every term of the "
    "stated value. Per question, R@k = share of its evidence turns recalled by the top k "
    f"items; tok@{TOKEN_BUDGET} = share recalled within the first {TOKEN_BUDGET} tokens "
    "of recalled text (mnemoray.tokens.count_tokens, items concatenated in rank order, an "
    "item's evidence counted where the stating sentence ends, else where the item ends). "
    "Figures are means over questions. stale@1 (changed_now): the top item recalls the "
    "superseded turn and not the current one; stale-first: the superseded turn is "
    "recalled at a better rank than the current one (or the current one not at all)."
)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------
# Strict scoring
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Item:
    """One recalled unit: what an agent would read and the events it cites."""

    text: str
    sources: frozenset[str]
    kind: str = ""


def holds(text: str, evidence: dict[str, Any], text_terms: set[str] | None = None) -> bool:
    """Whether ``text`` holds the evidence's words (see :data:`SCORING`)."""
    have = set(terms(text)) if text_terms is None else text_terms
    key = set(terms(evidence["key"]))
    if key and len(key & have) / len(key) < HOLD_SHARE:
        return False
    return all(set(terms(m)) <= have for m in evidence["must"])


def recalls(item: Item, evidence: dict[str, Any], text_terms: set[str] | None = None) -> bool:
    return evidence["event_id"] in item.sources and holds(item.text, evidence, text_terms)


def judge(question: dict[str, Any], items: Sequence[Item]) -> dict[str, Any]:
    """Per evidence turn: the first rank that recalls it and whether that is inside the
    token budget; R@5 / R@10 / tok@budget for the question; stale flags for changes."""
    evidence = question["evidence"]
    items = items[:TOP_K]
    item_terms = [set(terms(it.text)) for it in items]
    starts = [0]  # tokens of recalled text before each item
    for it in items:
        starts.append(starts[-1] + count_tokens(it.text))
    ranks: list[int | None] = []
    in_budget: list[bool] = []
    for ev in evidence:
        rank, within = None, False
        for r, (it, have) in enumerate(zip(items, item_terms, strict=True), start=1):
            if not recalls(it, ev, have):
                continue
            rank = rank or r
            pos = it.text.find(ev["key"])
            upto = it.text if pos < 0 else it.text[: pos + len(ev["key"])]
            within = within or starts[r - 1] + count_tokens(upto) <= TOKEN_BUDGET
        ranks.append(rank)
        in_budget.append(within)
    n = len(evidence)
    out: dict[str, Any] = {
        "qid": question["qid"],
        "kind": question["kind"],
        "ranks": ranks,
        "R@5": sum(1 for r in ranks if r and r <= 5) / n,
        "R@10": sum(1 for r in ranks if r and r <= TOP_K) / n,
        f"tok@{TOKEN_BUDGET}": sum(in_budget) / n,
        "tokens_top10": starts[-1],
    }
    if question.get("stale"):
        stale_ranks = [
            next(
                (
                    r
                    for r, (it, have) in enumerate(zip(items, item_terms, strict=True), start=1)
                    if recalls(it, ev, have)
                ),
                None,
            )
            for ev in question["stale"]
        ]
        best_stale = min((r for r in stale_ranks if r), default=None)
        best_now = min((r for r in ranks if r), default=None)
        out["stale@1"] = best_stale == 1 and best_now != 1
        out["stale_first"] = best_stale is not None and (best_now is None or best_stale < best_now)
    return out


def summarize(judged: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(judged)
    if not n:
        return {"n": 0}
    out: dict[str, Any] = {"n": n}
    for key in ("R@5", "R@10", f"tok@{TOKEN_BUDGET}"):
        out[key] = round(sum(j[key] for j in judged) / n, 4)
    out["tokens_top10_mean"] = round(sum(j["tokens_top10"] for j in judged) / n, 1)
    with_stale = [j for j in judged if "stale@1" in j]
    if with_stale:
        out["stale@1"] = round(sum(j["stale@1"] for j in with_stale) / len(with_stale), 4)
        out["stale_first"] = round(sum(j["stale_first"] for j in with_stale) / len(with_stale), 4)
    return out


def by_kind(judged: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out = {"all": summarize([j for j in judged if j["kind"] in MAIN_KINDS])}
    for kind in data.KINDS:
        block = summarize([j for j in judged if j["kind"] == kind])
        if block["n"]:
            out[kind] = block
    return out


# ---------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------
def ingest(service: MemoryService, sessions: Sequence[Session]) -> dict[str, Any]:
    t0 = time.perf_counter()
    kinds: Counter[str] = Counter()
    times = []
    for i, s in enumerate(sessions, start=1):
        t = time.perf_counter()
        kinds.update(m.kind for m in service.add_session(s))
        times.append(time.perf_counter() - t)
        if i % 48 == 0 or i == len(sessions):
            log(f"  ingested {i}/{len(sessions)} sessions ({time.perf_counter() - t0:.0f}s)")
    times.sort()
    return {
        "path": "MemoryService.add_session, one commit per session",
        "sessions": len(sessions),
        "memories": sum(kinds.values()),
        "memories_by_kind": dict(sorted(kinds.items())),
        "total_s": round(time.perf_counter() - t0, 1),
        "ms_per_session_p50": round(times[len(times) // 2] * 1000, 1),
    }


def run_mode(
    service: MemoryService, app: str, questions: Sequence[dict[str, Any]], mode: str
) -> dict[str, Any]:
    t0 = time.perf_counter()
    judged = []
    for q in questions:
        results = service.search(app, q["user_id"], q["question"], top_k=TOP_K, mode=mode)
        items = [
            Item(r.memory.text, frozenset(r.memory.source_event_ids), r.memory.kind)
            for r in results
        ]
        judged.append(judge(q, items))
    return {
        "by_kind": by_kind(judged),
        "eval_s": round(time.perf_counter() - t0, 1),
        "judged": judged,
    }


def render_turn(event: Any) -> str:
    return f"[{iso(event.timestamp)[:10]}] {event.author}: {event.text}"


class TurnBM25:
    """Per user, one BM25 index over single turns (one document per turn,
    ``[date] Speaker: text``, citing its event): the baseline beside the library."""

    def __init__(self, sessions: Iterable[Session]) -> None:
        self.turns: dict[str, list[Item]] = {}
        for s in sessions:
            self.turns.setdefault(s.user_id, []).extend(
                Item(render_turn(e), frozenset({e.id}), "turn") for e in s.events
            )
        self.indexes = {user: BM25([it.text for it in items]) for user, items in self.turns.items()}

    def top(self, user_id: str, query: str, top_k: int) -> list[Item]:
        """The user's best ``top_k`` turns that share a term with ``query``."""
        items = self.turns[user_id]
        scores = self.indexes[user_id].scores(query)
        order = sorted(range(len(items)), key=lambda i: (-scores[i], i))[:top_k]
        return [items[i] for i in order if scores[i] > 0]


def run_turn_bm25(
    sessions: Iterable[Session],
    questions: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The baseline: one BM25 index over a pair's single turns, top 10 turns."""
    t0 = time.perf_counter()
    index = TurnBM25(sessions)
    judged = [judge(q, index.top(q["user_id"], q["question"], TOP_K)) for q in questions]
    return {
        "by_kind": by_kind(judged),
        "eval_s": round(time.perf_counter() - t0, 1),
        "judged": judged,
    }


def windows(sessions: Iterable[Session]) -> dict[str, list[Item]]:
    """Per pair: 3-turn windows (overlap 1), each line ``[date] Speaker: text``."""
    out: dict[str, list[Item]] = {}
    for s in sessions:
        ev = s.events
        for start in range(0, max(1, len(ev) - WINDOW + STRIDE), STRIDE):
            part = ev[start : start + WINDOW]
            out.setdefault(s.user_id, []).append(
                Item(
                    "\n".join(render_turn(e) for e in part), frozenset(e.id for e in part), "window"
                )
            )
    return out


def run_window_probe(
    sessions: Iterable[Session], questions: Sequence[dict[str, Any]], embedder: Any
) -> dict[str, Any]:
    """The issue's probe: 3-turn windows ranked by reciprocal rank fusion of BM25 and
    MiniLM cosine (not the library's recall; a pointer for what granularity does)."""
    import numpy as np

    t0 = time.perf_counter()
    wins = windows(sessions)
    indexes = {user: BM25([it.text for it in items]) for user, items in wins.items()}
    vectors = {user: embedder.encode([it.text for it in items]) for user, items in wins.items()}
    t_embed = time.perf_counter() - t0
    qvecs = embedder.encode([q["question"] for q in questions])
    judged = []
    for q, qv in zip(questions, qvecs, strict=True):
        items = wins[q["user_id"]]
        fused = np.zeros(len(items))
        for scores in (indexes[q["user_id"]].scores(q["question"]), vectors[q["user_id"]] @ qv):
            order = np.argsort(-scores, kind="stable")
            fused[order] += 1.0 / (RRF_K + np.arange(1, len(items) + 1))
        top = np.argsort(-fused, kind="stable")[:TOP_K]
        judged.append(judge(q, [items[i] for i in top]))
    return {
        "by_kind": by_kind(judged),
        "eval_s": round(time.perf_counter() - t0, 1),
        "embed_windows_s": round(t_embed, 1),
        "judged": judged,
    }


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
def table(quality: dict[str, Any]) -> str:
    tok = f"tok@{TOKEN_BUDGET // 1000}K"
    lines = [
        f"{'run':20s} {'questions':15s} {'n':>4s} {'R@5':>6s} {'R@10':>6s} {tok:>7s} "
        f"{'tokens':>6s} {'stale@1':>7s}"
    ]
    for label, block in quality.items():
        for name, m in block["by_kind"].items():
            stale = f"{m['stale@1']:7.3f}" if "stale@1" in m else f"{'':7s}"
            lines.append(
                f"{label:20s} {name:15s} {m['n']:4d} {m['R@5']:6.3f} "
                f"{m['R@10']:6.3f} {m[f'tok@{TOKEN_BUDGET}']:7.3f} "
                f"{m['tokens_top10_mean']:6.0f} {stale}"
            )
    return "\n".join(lines)


def readme_section(result: dict[str, Any], tbl: str) -> str:
    ds, ing, m = result["dataset"], result["ingest"], result["machine"]
    cfg = ds["config"]
    qk = ", ".join(f"{v} {k}" for k, v in ds["questions_by_kind"].items())
    kinds = ", ".join(f"{v} {k}" for k, v in ing["memories_by_kind"].items())
    return "\n".join(
        [
            "## Long conversations (`benchmarks/longconv_bench.py`)",
            "",
            f"Generated set (`benchmarks/longconv_data.py`, seed {cfg['seed']}) shaped like "
            f"a held-out long-conversation set: {ds['pairs']} pairs of named speakers "
            f"(nicknames used too), {cfg['sessions']} dated sessions per pair over about ten "
            f"months, "
            f"{cfg['min_turns']}-{cfg['max_turns']} turns per session ({ds['turns']} turns in "
            "all): chit-chat, recurring people, places, pets and workplaces, other people's "
            "facts, facts that change (a move, a new job) and events told with a relative "
            'date ("last Saturday"). Both speakers write `role="user"` events with their '
            f"name as author; a pair is one user scope. Questions: {qk}; `all` = the first "
            "four kinds.",
            "",
            f"Ingested with `MemoryService.add_session` (extractive summarizer, "
            f"{result['config']['embedder']}): {ing['memories']} memories ({kinds}) in "
            f"{ing['total_s']:.0f} s. Every question goes through `MemoryService.search"
            f"(top_k={TOP_K}, mode=...)`; `{BASELINE}` ranks single turns with mnemoray's "
            "BM25 and is scored the same way"
            + (
                f"; `{PROBE}` is the reference probe outside the library (3-turn windows, overlap "
                "1, each line `[date] Speaker: text`, reciprocal rank fusion of BM25 and MiniLM "
                "cosine)"
                if PROBE in result["quality"]
                else ""
            )
            + ". tokens = mean tokens of the top 10 items.",
            "",
            f"*{SCORING}*",
            "",
            "```",
            tbl,
            "```",
            "",
            f"Machine: {m['cpus']} cores ({m['cpu_model']}), shared; commit "
            f"{result['commit']['sha'][:10]}{' (dirty tree)' if result['commit']['dirty'] else ''}"
            f". Full run took {result['run_s'] / 60:.1f} min.",
            "",
        ]
    )


def update_readme(section: str, path: Path = README) -> None:
    update_section(path, "Long conversations", section)


def questions_path(out: Path) -> Path:
    return out.with_name(f"{out.stem}_questions.json")


def write_results(
    out: Path, result: dict[str, Any], judged: dict[str, list[dict[str, Any]]]
) -> None:
    """The run's results at ``out`` and, beside it, per question and run the rank that
    recalled each evidence turn (null: none recalled), for before/after comparisons
    question by question."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    questions_path(out).write_text(
        json.dumps(
            {label: {j["qid"]: j["ranks"] for j in js} for label, js in judged.items()},
            separators=(",", ":"),
        )
        + "\n"
    )


def commit_info() -> dict[str, Any]:
    root = HERE.parent

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {
        "sha": git("rev-parse", "HEAD") or "unknown",
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def machine_info() -> dict[str, Any]:
    from benchmarks.machine import machine

    return machine()


# ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2 pairs x 20 sessions")
    p.add_argument("--pairs", type=int)
    p.add_argument("--sessions", type=int, help="sessions per pair (default 24, quick 20)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--modes",
        default=",".join(MODES),
        help="comma-separated search modes (keyword only: no embedder is loaded)",
    )
    p.add_argument("--no-baseline", action="store_true", help="skip BM25 over single turns")
    p.add_argument(
        "--probe",
        action="store_true",
        help="also the issue's probe: 3-turn windows, RRF of BM25 and MiniLM "
        "(embeds every window: about a minute per 1,000 windows on 2 cores)",
    )
    p.add_argument("--cache", type=Path, default=CACHE, help="dataset cache and store root")
    p.add_argument("--out", type=Path, default=RESULTS, help="results JSON")
    p.add_argument("--readme", type=Path, default=README)
    p.add_argument("--no-readme", action="store_true")
    args = p.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        p.error(f"--modes: expected some of {', '.join(MODES)}, got {args.modes!r}")
    pairs = args.pairs or (2 if args.quick else 10)
    sessions_n = args.sessions or (20 if args.quick else 24)
    if pairs < 1 or sessions_n < 8:
        p.error("--pairs must be >= 1 and --sessions >= 8")
    started = time.perf_counter()

    cfg = data.LongConvConfig(pairs=pairs, sessions=sessions_n, seed=args.seed)
    ds_dir, meta = data.load_or_generate(cfg, args.cache)
    sessions = read_archive(ds_dir / "archive")
    questions = data.read_questions(ds_dir / "questions.jsonl")
    log(
        f"dataset {ds_dir.name}: {meta['sessions']} sessions, {meta['turns']} turns, "
        f"{meta['questions']} questions {meta['questions_by_kind']}"
    )

    store_dir = args.cache / f"store-longconv-{meta['fingerprint']}"
    shutil.rmtree(store_dir, ignore_errors=True)
    embedder = "default" if set(modes) - {"keyword"} else None
    service = MemoryService.open(store_dir, embedder=embedder, summarizer="extractive")
    log(
        f"ingesting into {store_dir} (embedder: "
        f"{service.embedder.model_id if service.embedder else 'none'})"
    )
    ing = ingest(service, sessions)
    log(f"ingested {ing['memories']} memories {ing['memories_by_kind']} in {ing['total_s']}s")

    quality: dict[str, Any] = {}
    for mode in modes:
        quality[mode] = run_mode(service, cfg.app_name, questions, mode)
        a = quality[mode]["by_kind"]["all"]
        log(
            f"  {mode:8s} R@5 {a['R@5']:.3f} R@10 {a['R@10']:.3f} "
            f"tok@1K {a[f'tok@{TOKEN_BUDGET}']:.3f} ({quality[mode]['eval_s']}s)"
        )
    if not args.no_baseline:
        quality[BASELINE] = run_turn_bm25(sessions, questions)
    if args.probe:
        if service.embedder is None:
            p.error("--probe needs a dense mode in --modes (it uses the embedder)")
        log("probe: embedding 3-turn windows ...")
        quality[PROBE] = run_window_probe(sessions, questions, service.embedder)
    judged = {label: block.pop("judged") for label, block in quality.items()}

    result = {
        "benchmark": "longconv",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit_info(),
        "machine": machine_info(),
        "config": {
            "quick": args.quick,
            "top_k": TOP_K,
            "token_budget": TOKEN_BUDGET,
            "hold_share": HOLD_SHARE,
            "modes": modes,
            "embedder": service.embedder.model_id if service.embedder else None,
            "summarizer": service.summarizer.name,
            "chunk_turns": service.chunk_turns,
            "retrieval": {
                "weights": dict(service.config.weights),
                "recency_window": service.config.recency_window,
            },
        },
        "scoring": SCORING,
        "dataset": {
            **{
                k: meta[k]
                for k in (
                    "fingerprint",
                    "pairs",
                    "sessions",
                    "turns",
                    "questions",
                    "questions_by_kind",
                )
            },
            "config": meta["config"],
        },
        "ingest": ing,
        "quality": quality,
        "per_question_file": questions_path(args.out).name,
    }
    service.close()
    shutil.rmtree(store_dir, ignore_errors=True)
    result["run_s"] = round(time.perf_counter() - started, 1)
    write_results(args.out, result, judged)

    tbl = table(quality)
    print()
    print(SCORING)
    print(tbl)
    print(f"\nwrote {args.out} (run {result['run_s'] / 60:.1f} min)")
    if not args.no_readme:
        update_readme(readme_section(result, tbl), args.readme)
        print(f"updated {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
