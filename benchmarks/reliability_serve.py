"""Reliability of a running server: acknowledged writes across SIGKILLs, hostile input,
load held, slow clients. Each part drives a real ``mnemoray`` server (``benchmarks.serve_process``)
over HTTP with an API key, as an operator and an attacker would."""

from __future__ import annotations

import contextlib
import json
import random
import select
import socket
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx

from benchmarks.hostile_requests import SlowClient, hostile_requests
from benchmarks.hostile_requests import slow_clients as slow_client_cases
from benchmarks.serve_process import Server, tree_rss

APP = "rel"
KEY = "reliability-key-0123456789abcdef"
WORDS = (
    "parrot",
    "Madrid",
    "marathon",
    "sourdough",
    "violin",
    "Kyoto",
    "chess",
    "tulips",
    "kayak",
    "espresso",
    "lighthouse",
    "origami",
    "glacier",
    "saxophone",
    "cactus",
)


def start(store: Path, work: Path, log: Callable[[str], None]) -> Server:
    keys = work / "keys.json"
    keys.write_text(json.dumps({KEY: APP}))
    server = Server(
        store,
        {"server.api_keys": str(keys), "server.reload_interval_s": 0.25},
        {},
        work / "server.log",
    )
    log(f"server ready in {server.wait_ready(600):.1f} s (port {server.port})")
    return server


def client(server: Server, timeout: float = 30.0) -> httpx.Client:
    return httpx.Client(
        base_url=server.base, timeout=timeout, headers={"Authorization": f"Bearer {KEY}"}
    )


# -- acknowledged writes across SIGKILL -------------------------------------------------------
@dataclass
class WriterLog:
    """What one writer sent, and what the server acknowledged."""

    user: str
    sent_memories: list[str] = field(default_factory=list)
    acked_memories: list[str] = field(default_factory=list)
    sent_events: list[str] = field(default_factory=list)
    acked_events: list[str] = field(default_factory=list)
    errors: int = 0


def _writer(
    server: Server, wlog: WriterLog, stop: threading.Event, rnd: random.Random, round_no: int
) -> None:
    who = {"app_name": APP, "user_id": wlog.user}
    session = f"s-{wlog.user}"
    with client(server, timeout=10) as c:
        if round_no == 0:
            c.post("/v1/sessions", json={**who, "session_id": session})
        n = 0
        while not stop.is_set():
            n += 1
            mid = f"r{round_no}-m{n}"
            text = f"{wlog.user} round {round_no} note {n}: " + " ".join(rnd.sample(WORDS, 4))
            wlog.sent_memories.append(mid)
            try:
                r = c.post(
                    "/v1/memories", json={**who, "memories": [{"text": text, "memory_id": mid}]}
                )
                if r.status_code == 201:
                    wlog.acked_memories.append(mid)
                eid = f"r{round_no}-e{n}"
                wlog.sent_events.append(eid)
                r = c.post(
                    f"/v1/sessions/{session}/events",
                    json={**who, "events": [{"id": eid, "author": "user", "text": text}]},
                )
                if r.status_code == 200:
                    wlog.acked_events.append(eid)
            except httpx.HTTPError:
                wlog.errors += 1
                if stop.wait(0.05):
                    return


def _stored(c: httpx.Client, user: str) -> tuple[list[str], list[str]]:
    """(memory ids, event ids) the server serves for ``user``."""
    ids: list[str] = []
    cursor = None
    while True:
        params = {"app_name": APP, "user_id": user, "limit": 500}
        if cursor:
            params["cursor"] = cursor
        page = c.get("/v1/memories", params=params).raise_for_status().json()
        ids += [m["memory_id"] for m in page["memories"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    r = c.get(f"/v1/sessions/s-{user}", params={"app_name": APP, "user_id": user})
    events = [e["id"] for e in r.raise_for_status().json()["events"]]
    return ids, events


def acked_writes(
    store: Path,
    work: Path,
    log: Callable[[str], None],
    *,
    writers: int,
    write_s: float,
    rounds: int,
) -> tuple[dict[str, Any], Server]:
    """``rounds`` times: ``writers`` clients write memories and events for ``write_s``
    seconds, then the whole server tree is SIGKILLed mid-write and restarted. Every
    acknowledged write must be served afterwards, once, in order. Returns the figures
    and the running (restarted) server."""
    logs = [WriterLog(f"w{i}") for i in range(writers)]
    server = start(store, work, log)
    killed: list[int] = []
    for round_no in range(rounds):
        stop = threading.Event()
        threads = [
            threading.Thread(target=_writer, args=(server, wl, stop, random.Random(i), round_no))
            for i, wl in enumerate(logs)
        ]
        for t in threads:
            t.start()
        time.sleep(write_s)
        killed.append(server.kill())  # mid-write: some requests are in flight
        stop.set()
        for t in threads:
            t.join()
        log(
            f"round {round_no}: SIGKILLed {killed[-1]} processes; "
            f"{sum(len(w.acked_memories) for w in logs)} memories acknowledged so far"
        )
        server = start(store, work, log)
    out = {
        "writers": writers,
        "rounds": rounds,
        "processes_killed": killed,
        "memories_acked": 0,
        "memories_acked_served": 0,
        "memories_unacked_served": 0,
        "memories_unacked": 0,
        "memory_duplicates": 0,
        "events_acked": 0,
        "events_acked_served": 0,
        "events_out_of_order": 0,
        "event_duplicates": 0,
    }
    with client(server) as c:
        for wl in logs:
            ids, events = _stored(c, wl.user)
            acked, sent = set(wl.acked_memories), set(wl.sent_memories)
            out["memories_acked"] += len(acked)
            out["memories_acked_served"] += len(acked & set(ids))
            out["memories_unacked"] += len(sent - acked)
            out["memories_unacked_served"] += len((sent - acked) & set(ids))
            out["memory_duplicates"] += len(ids) - len(set(ids))
            out["events_acked"] += len(wl.acked_events)
            out["events_acked_served"] += len(set(wl.acked_events) & set(events))
            out["event_duplicates"] += len(events) - len(set(events))
            order = {e: i for i, e in enumerate(wl.sent_events)}
            seq = [order[e] for e in events if e in order]
            out["events_out_of_order"] += sum(1 for a, b in pairwise(seq) if b < a)
    out["acked_served_pct"] = round(
        100.0
        * (out["memories_acked_served"] + out["events_acked_served"])
        / max(1, out["memories_acked"] + out["events_acked"]),
        2,
    )
    return out, server


# -- hostile input ------------------------------------------------------------------------------
def hostile_input(server: Server, log: Callable[[str], None]) -> dict[str, Any]:
    """Every request of ``benchmarks.hostile_requests``: statuses by class; no 5xx wanted.
    Then the tenant's recall, list and compile must still answer 200."""
    who = {"app_name": APP, "user_id": "fuzz"}
    by_class: dict[str, int] = {}
    fives: list[dict[str, Any]] = []
    with client(server) as c:
        c.post("/v1/sessions", json={**who, "session_id": "fz"})
        cases = hostile_requests(APP, "fuzz", "fz")
        for case in cases:
            r = c.request(
                case.method,
                case.path,
                content=case.body,
                params=case.params,
                headers={"content-type": "application/json", **case.headers},
            )
            cls = f"{r.status_code // 100}xx"
            by_class[cls] = by_class.get(cls, 0) + 1
            if r.status_code >= 500:
                fives.append({"case": case.name, "status": r.status_code, "body": r.text[:160]})
        after = {
            "recall": c.post("/v1/recall", json={**who, "query": "Madrid"}).status_code,
            "list": c.get("/v1/memories", params=who).status_code,
            "compile": c.post(
                "/v1/context:compile",
                json={
                    **who,
                    "session_id": "fz",
                    "agent": {"name": "a", "memory_preload": True},
                    "new_message": "where do I live?",
                },
            ).status_code,
            "healthz": c.get("/healthz").status_code,
        }
    log(f"hostile input: {len(cases)} requests, {by_class}, 5xx: {len(fives)}")
    return {
        "requests": len(cases),
        "by_class": by_class,
        "five_xx": len(fives),
        "five_xx_cases": fives[:20],
        "after": after,
        "after_ok": all(v == 200 for v in after.values()),
    }


# -- load held ------------------------------------------------------------------------------------
def load_held(
    server: Server, log: Callable[[str], None], *, clients: int, seconds: float
) -> dict[str, Any]:
    """``clients`` threads for ``seconds``: recall (70%), add (15%), append (15%). Errors
    and the server tree's resident memory every few seconds."""
    stop = threading.Event()
    lat: dict[str, list[float]] = {"recall": [], "add": [], "append": []}
    errors: list[str] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        rnd = random.Random(100 + i)
        user = f"load{i}"
        who = {"app_name": APP, "user_id": user}
        with client(server) as c:
            c.post("/v1/sessions", json={**who, "session_id": f"l{i}"})
            n = 0
            while not stop.is_set():
                n += 1
                p = rnd.random()
                op = "recall" if p < 0.7 else "add" if p < 0.85 else "append"
                text = " ".join(rnd.sample(WORDS, 5)) + f" {n}"
                t0 = time.perf_counter()
                try:
                    if op == "recall":
                        r = c.post("/v1/recall", json={**who, "query": text, "top_k": 5})
                    elif op == "add":
                        r = c.post("/v1/memories", json={**who, "memories": [{"text": text}]})
                    else:
                        r = c.post(
                            f"/v1/sessions/l{i}/events",
                            json={**who, "events": [{"author": "user", "text": text}]},
                        )
                    ok = r.status_code < 300
                    what = f"{op} {r.status_code}"
                except httpx.HTTPError as exc:
                    ok, what = False, f"{op} {type(exc).__name__}"
                with lock:
                    lat[op].append(time.perf_counter() - t0)
                    if not ok:
                        errors.append(what)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    rss: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        rss.append((round(time.perf_counter() - t0, 1), tree_rss([server.proc.pid])))
        time.sleep(min(5.0, seconds / 10))
    stop.set()
    for t in threads:
        t.join()
    rss.append((round(time.perf_counter() - t0, 1), tree_rss([server.proc.pid])))
    mib = [r / 2**20 for _, r in rss]
    # Growth over the second half: warm-up allocations (caches, pools) come first.
    half = mib[len(mib) // 2 :]
    out = {
        "clients": clients,
        "seconds": seconds,
        "requests": sum(len(v) for v in lat.values()),
        "errors": len(errors),
        "error_kinds": sorted(set(errors))[:10],
        "ops": {
            op: {
                "n": len(v),
                "p50_ms": round(1000 * statistics.median(v), 1),
                "p99_ms": round(1000 * sorted(v)[int(0.99 * (len(v) - 1))], 1),
            }
            for op, v in lat.items()
            if v
        },
        "rss_mib": [[t, round(m, 1)] for (t, _), m in zip(rss, mib, strict=True)],
        "rss_start_mib": round(mib[0], 1),
        "rss_end_mib": round(mib[-1], 1),
        "rss_growth_second_half_mib": round(half[-1] - half[0], 1),
    }
    log(
        f"load: {out['requests']} requests, {out['errors']} errors, RSS "
        f"{out['rss_start_mib']} -> {out['rss_end_mib']} MiB"
    )
    return out


__all__ = ["acked_writes", "hostile_input", "load_held", "start"]


# -- slow clients -------------------------------------------------------------------------------
OTHER_ADDRESS = "127.0.0.2"  # an honest client's source address: loopback, not the attacker's


@dataclass
class _Held:
    sock: socket.socket
    opened: float
    answer: bytes = b""
    closed_s: float | None = None  # after opening; None: still open
    sent: int = 0


def _answer_status(answer: bytes) -> int | None:
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def _honest(
    server: Server, source: str, stop: threading.Event, every_s: float
) -> list[tuple[int | str, float]]:
    """Recall requests from ``source`` (own pooled connection) until ``stop``."""
    out: list[tuple[int | str, float]] = []
    transport = httpx.HTTPTransport(local_address=source, retries=0)
    with httpx.Client(
        base_url=server.base,
        timeout=10.0,
        transport=transport,
        headers={"Authorization": f"Bearer {KEY}"},
    ) as c:
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                status: int | str = c.post(
                    "/v1/recall", json={"app_name": APP, "user_id": "slow", "query": "Madrid"}
                ).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            out.append((status, time.perf_counter() - t0))
            stop.wait(every_s)
    return out


def _hold(server: Server, case: SlowClient, sockets: int, limit_s: float) -> dict[str, Any]:
    """``sockets`` connections from 127.0.0.1 playing ``case`` until the server has
    closed every one or ``limit_s`` passed; meanwhile an honest client on another
    address, and one on the attacker's, ask for a recall."""
    stop = threading.Event()
    honest: dict[str, list[tuple[int | str, float]]] = {}

    def run(source: str) -> None:
        honest[source] = _honest(server, source, stop, 0.5)

    threads = [threading.Thread(target=run, args=(a,)) for a in (OTHER_ADDRESS, "127.0.0.1")]
    held: list[_Held] = []
    for _ in range(sockets):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sock.setblocking(False)
        held.append(_Held(sock, time.perf_counter()))
        with contextlib.suppress(OSError):
            sock.send(case.head)
    for t in threads:
        t.start()
    start = time.perf_counter()
    next_drip = start + case.every_s
    poller = select.poll()  # not select(): no limit on descriptor numbers
    by_fd = {h.sock.fileno(): h for h in held}
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    while by_fd and time.perf_counter() - start < limit_s:
        events = poller.poll(50)
        now = time.perf_counter()
        for fd, _ in events:
            h = by_fd[fd]
            try:
                chunk = h.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:  # reset
                chunk = b""
            if chunk:
                h.answer += chunk
                continue
            h.closed_s = now - h.opened
            poller.unregister(fd)
            del by_fd[fd]
        if now >= next_drip:
            next_drip += case.every_s
            for h in by_fd.values():
                if h.sent < len(case.drip):
                    with contextlib.suppress(OSError):  # closed: the next poll says so
                        h.sock.send(case.drip[h.sent : h.sent + 1])
                    h.sent += 1
    stop.set()
    for t in threads:
        t.join()
    for h in held:
        h.sock.close()
    statuses = [_answer_status(h.answer) for h in held if h.closed_s is not None]
    closed = sorted(h.closed_s for h in held if h.closed_s is not None)
    by_timeout = sorted(
        h.closed_s for h in held if h.closed_s is not None and _answer_status(h.answer) != 503
    )

    def summary(rows: list[tuple[int | str, float]]) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for status, _ in rows:
            counts[str(status)] = counts.get(str(status), 0) + 1
        ok = sorted(dt for status, dt in rows if status == 200)
        return {
            "requests": len(rows),
            "statuses": counts,
            "ok_p50_ms": round(1000 * statistics.median(ok), 1) if ok else None,
            "ok_max_ms": round(1000 * ok[-1], 1) if ok else None,
        }

    return {
        "sockets": sockets,
        "refused_503": statuses.count(503),
        "answered_408": statuses.count(408),
        "closed_silently": statuses.count(None),
        "still_open": sockets - len(closed),
        "closed_by_timeout_s": {
            "first": round(by_timeout[0], 2) if by_timeout else None,
            "last": round(by_timeout[-1], 2) if by_timeout else None,
        },
        "watched_s": round(time.perf_counter() - start, 1),
        "other_address": summary(honest.get(OTHER_ADDRESS, [])),
        "same_address": summary(honest.get("127.0.0.1", [])),
    }


def slow_clients(
    server: Server, log: Callable[[str], None], *, sockets: int, limit_s: float
) -> dict[str, Any]:
    """Each of ``benchmarks.hostile_requests.slow_clients`` from ``sockets`` connections
    of one address: how the server closed them, and whether clients kept being served."""
    with client(server) as c:  # the honest clients' tenant
        c.post(
            "/v1/memories",
            json={
                "app_name": APP,
                "user_id": "slow",
                "memories": [{"text": "The user moved to Madrid."}],
            },
        )
    out: dict[str, Any] = {}
    for case in slow_client_cases(APP, "slow", KEY):
        row = _hold(server, case, sockets, limit_s)
        out[case.name] = row
        log(
            f"slow clients, {case.name}: {row['refused_503']} refused, {row['answered_408']} "
            f"408, {row['closed_silently']} closed, {row['still_open']} still open after "
            f"{row['watched_s']} s; other address {row['other_address']['statuses']}"
        )
        time.sleep(1.0)  # the server counts closed connections out
    return {"sockets": sockets, "limit_s": limit_s, "cases": out}
