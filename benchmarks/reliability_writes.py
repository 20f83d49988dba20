"""One tenant's large write beside another tenant's small ones, on a running server.

Tenant ``big`` sends one large write; meanwhile tenant ``small`` adds one short memory
after another until it is done. What is measured is what ``small`` waits per add (beside
the same adds alone), what the large write takes and answers, and the server tree's
resident memory before and after:

- ``sync add at the cap``: 64 memories whose text adds up to ``server.max_sync_embed_chars``
  (the default), embedded before the answer;
- ``sync add over the cap``: 64 memories of the 32,000-character maximum each: refused
  (413) before any work;
- ``queued large session``: a long session posted with ``?wait=false``; its job is
  distilled and embedded by the ingestion worker while ``small`` adds.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from benchmarks.reliability_serve import APP, WORDS, client
from benchmarks.serve_process import Server, tree_rss
from mnemoray.limits import MAX_MEMORY_TEXT_CHARS, MAX_SYNC_EMBED_CHARS

MEMORIES = 64  # the most one request may carry (mnemoray.schemas.memories)
SESSION_EVENTS = 100
EVENT_CHARS = 2_000


def _text(rnd: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = f"{rnd.choice(WORDS)}{rnd.randint(0, 9999)}"
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def _memories(rnd: random.Random, chars_each: int) -> dict[str, Any]:
    return {
        "app_name": APP,
        "user_id": "big",
        "memories": [{"text": _text(rnd, chars_each)} for _ in range(MEMORIES)],
    }


def _session(rnd: random.Random) -> dict[str, Any]:
    events = [
        {
            "author": "user" if i % 2 == 0 else "agent",
            "role": "user" if i % 2 == 0 else "model",
            "text": _text(rnd, EVENT_CHARS),
            "timestamp": 1_700_000_000.0 + i,
        }
        for i in range(SESSION_EVENTS)
    ]
    return {"session_id": f"long-{rnd.randint(0, 10**9)}", "events": events}


def _small_add(c: httpx.Client, n: int) -> float:
    t0 = time.perf_counter()
    r = c.post(
        "/v1/memories",
        json={"app_name": APP, "user_id": "small", "memories": [{"text": f"small note {n}"}]},
    )
    took = time.perf_counter() - t0
    if r.status_code != 201:
        raise RuntimeError(f"small add answered {r.status_code}: {r.text[:200]}")
    return took


def _ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(1000 * statistics.median(values), 1),
        "max_ms": round(1000 * max(values), 1),
    }


def _beside(large: Callable[[], int], small: httpx.Client, start_n: int) -> dict[str, Any]:
    """``large()`` (returns its final HTTP status) in a thread; small adds one after
    another until it returns (at least one)."""
    out: dict[str, Any] = {}

    def run() -> None:
        t0 = time.perf_counter()
        out["large_status"] = large()
        out["large_s"] = round(time.perf_counter() - t0, 2)

    thread = threading.Thread(target=run)
    thread.start()
    lat: list[float] = []
    while thread.is_alive() or not lat:
        lat.append(_small_add(small, start_n + len(lat)))
    thread.join()
    return {**out, "small_adds": len(lat), **{f"small_{k}": v for k, v in _ms(lat).items()}}


def _queued(big: httpx.Client, session: dict[str, Any]) -> int:
    r = big.post(
        "/v1/memories",
        params={"wait": "false"},
        json={"app_name": APP, "user_id": "big", "session": session},
    )
    if r.status_code != 202:
        return r.status_code
    job_id = r.json()["job_id"]
    while True:
        job = big.get(f"/v1/jobs/{job_id}", params={"app_name": APP, "user_id": "big"}).json()
        if job["status"] in ("done", "failed"):
            return 200 if job["status"] == "done" else 500
        time.sleep(0.25)


def contention(server: Server, log: Callable[[str], None]) -> dict[str, Any]:
    rnd = random.Random(7)
    rss = [tree_rss([server.proc.pid])]
    at_cap = _memories(rnd, MAX_SYNC_EMBED_CHARS // MEMORIES)
    over_cap = _memories(rnd, MAX_MEMORY_TEXT_CHARS)
    session = _session(rnd)
    with client(server, timeout=600) as big, client(server) as small:
        for n in range(3):  # warm-up: first calls load what they need
            _small_add(small, n)
        alone = [_small_add(small, 10 + n) for n in range(10)]
        log(f"small add alone: p50 {1000 * statistics.median(alone):.1f} ms")
        cases: dict[str, Any] = {}
        for n, (name, large) in enumerate(
            (
                ("sync add at the cap", lambda: big.post("/v1/memories", json=at_cap).status_code),
                (
                    "sync add over the cap",
                    lambda: big.post("/v1/memories", json=over_cap).status_code,
                ),
                ("queued large session", lambda: _queued(big, session)),
            )
        ):
            cases[name] = _beside(large, small, 1000 * (n + 1))
            rss.append(tree_rss([server.proc.pid]))
            log(f"{name}: {cases[name]}")
    mib = [round(r / 2**20, 1) for r in rss]
    return {
        "small_alone": _ms(alone),
        "cases": cases,
        "sizes": {
            "at_cap_chars": MEMORIES * (MAX_SYNC_EMBED_CHARS // MEMORIES),
            "over_cap_chars": MEMORIES * MAX_MEMORY_TEXT_CHARS,
            "session_chars": SESSION_EVENTS * EVENT_CHARS,
        },
        "rss_mib": mib,
    }


__all__ = ["contention"]
