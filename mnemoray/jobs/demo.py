"""The end-to-end demo on the embedded default: backfill on Ray Data, serve, recall.

    python -m mnemoray.jobs.demo [--workdir DIR] [--port 8011]

`mnemoray demo` runs it after the compile demo. Steps: write a generated
archive (the long travel session of `mnemoray.compiler.demo_session` for two travellers, plus the
example pet/cooking/tax sessions of `examples/archive.jsonl`), backfill it on a
local Ray instance, start the Serve app on 127.0.0.1, and run a few recalls and a
memory-preloaded compile through HTTP with `mnemoray.client`. Last, the live loop: a
session with a compaction policy is compacted by the server as events arrive, and
ending it answers at once with a background ingestion job that is then followed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.backfill.archive import write_archive
from mnemoray.client import MnemorayClient
from mnemoray.compiler.demo_session import TRAVEL_AGENT, build_demo_session
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import InMemorySessionStore

# The repository's example archive (the demo runs from a checkout).
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "archive.jsonl"

RECALLS = [
    ("pets_app", "maya", "remind me about that flying animal we talked about"),
    ("pets_app", "maya", "where do I live now?"),
    ("pets_app", "omar", "what did we say about my bird?"),
    ("travel_app", "maya", "what should restaurants know about my diet?"),
]


def write_demo_archive(root: Path) -> Path:
    """A generated archive: two travellers' long sessions + the example sessions."""
    sessions: list[Session] = []
    for user in ("maya", "jonas"):
        store = InMemorySessionStore()
        built = build_demo_session(store, InMemoryArtifactStore(), turns=24, user_id=user)
        sessions.append(store.get_session(*built.session.key))
    archive = root / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    write_archive(sessions, archive / "travel.parquet")
    # Keeps the example file's malformed last row: the backfill must quarantine it.
    (archive / "examples.jsonl").write_bytes(EXAMPLES.read_bytes())
    return archive


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mnemoray.jobs.demo")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--port", type=int, default=8011)
    args = parser.parse_args(argv)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="mnemoray-e2e-"))
    run(root, args.port)


def run(root: Path, port: int) -> None:
    import ray
    from ray import serve

    from mnemoray.backfill import BackfillConfig, backfill
    from mnemoray.pipeline.backfill import LOCAL_ENV, RayDataEngine
    from mnemoray.ray_local import start_ray
    from mnemoray.serve.app import APP_NAME, build_app

    archive = write_demo_archive(root)
    store = root / "store"
    print(f"\n=== backfill on Ray Data: {archive} -> {store} ===", flush=True)
    # The replicas' own logs stay in Ray's log files: the demo prints what a user sees.
    started = start_ray("local", LOCAL_ENV, log_to_driver=False)
    try:
        report = backfill(
            BackfillConfig(archive=str(archive), store=str(store), shards=4), RayDataEngine()
        )
        print(
            f"sessions read {report.sessions_read}, skipped {report.skipped}, quarantined "
            f"{report.quarantined}, memories written {report.memories_written} in "
            f"{report.seconds:.1f} s; run report {report.report_path}"
        )

        print(
            f"\n=== Serve app on http://127.0.0.1:{port} (no API keys: open, loopback only) ===",
            flush=True,
        )
        # The default path (server.ingress: direct): the replica answers on the port
        # itself, so Serve starts no HTTP proxy.
        serve.start(proxy_location="Disabled")
        serve.run(
            build_app({"store": str(store), "server": {"port": port}}),
            name=APP_NAME,
            route_prefix="/",
        )
        with MnemorayClient(f"http://127.0.0.1:{port}", timeout=60) as client:
            print(f"healthz: {client.healthz()}")
            for app_name, user, query in RECALLS:
                result = client.recall(app_name, user, query, top_k=3)
                print(f"\nPOST /v1/recall {app_name}/{user}: {query!r} ({result.took_ms:.1f} ms)")
                for rank, m in enumerate(result.memories, 1):
                    text = m.text.replace("\n", " / ")
                    sid = m.provenance.session_id
                    print(f"  {rank}. {m.score:.4f} {m.kind:<16} {sid:<14} {text[:90]}")
            _compile_over_http(client)
            sid = _live_loop_over_http(client)
        _screenshots(f"http://127.0.0.1:{port}", root / "screenshots", sid)
    finally:
        if started:
            # Ray goes down with the Serve app in it; serve.shutdown() first would kill
            # Serve's controller mid-way through its graceful shutdown, and the raylet
            # reports that task as failed on the demo's last line.
            ray.shutdown()
        else:
            serve.shutdown()  # a Ray the caller runs stays up; only the demo's app goes


def _compile_over_http(client: MnemorayClient) -> None:
    """A new session through the API, compiled with memory preload."""
    session = client.create_session("travel_app", "maya", state={"user:name": "Maya"})
    sid = session.session_id
    client.append_events(
        "travel_app",
        "maya",
        sid,
        [
            {
                "author": "user",
                "role": "user",
                "type": "message",
                "text": "Plan a dinner for my last evening of the trip.",
            }
        ],
    )
    agent = {
        "name": TRAVEL_AGENT.name,
        "description": TRAVEL_AGENT.description,
        "static_instruction": TRAVEL_AGENT.static_instruction,
        "instruction": "Traveller: {user:name?}.",
        "memory_preload": True,
        "preload_top_k": 3,
        "memory_tools": TRAVEL_AGENT.memory_tools,
    }
    req = client.compile(
        "travel_app",
        "maya",
        sid,
        agent,
        new_message="Book a restaurant that suits my diet, please.",
    )
    print(f"\nPOST /v1/context:compile travel_app/maya/{sid}")
    print("--- system_instruction ---")
    print(req.system_instruction)
    # The recalled memories sit just before the new message (the default placement).
    for content in req.contents[:-1]:
        if content.text.startswith("<memory>"):
            print("--- memory block, just before the new message ---")
            print(content.text)
    print(
        f"--- {len(req.contents)} contents, tools: "
        f"{', '.join(t['name'] for t in req.tools)}; tokens: static prefix "
        f"{req.static_prefix_tokens}, total {req.total_tokens}"
    )
    for step in req.trace:
        print(f"  {step.name:<20}{step.tokens_added:>6} tok {step.micros:>7} us")


def _live_loop_over_http(client: MnemorayClient, turns: int = 120) -> str:
    """An agent that only appends events and asks for context: the server compacts the
    session by itself, and ending it queues the memory ingestion as a background job.
    Returns the session's id."""
    policy = {"token_threshold": 500, "keep_last": 4}
    sid = client.create_session("travel_app", "jonas", compaction=policy).session_id
    print(f"\n=== live loop: session travel_app/jonas/{sid}, compaction {policy} ===")
    events = [
        {
            "author": "user" if k % 2 == 0 else "agent",
            "role": "user" if k % 2 == 0 else "model",
            "text": (
                f"Day {k // 2 + 1}: I'd like a quiet hotel near the old town."
                if k % 2 == 0
                else f"Day {k // 2 + 1}: booked a quiet room for you."
            ),
        }
        for k in range(turns)
    ]
    events[0]["text"] = "I am allergic to peanuts, remember that for every booking."
    t0 = time.perf_counter()
    for start in range(0, turns, 20):
        client.append_events("travel_app", "jonas", sid, events[start : start + 20])
    print(f"appended {turns} events in batches of 20 ({time.perf_counter() - t0:.2f} s)")
    compactions: list[dict[str, Any]] = []
    landed = time.perf_counter()
    deadline = time.monotonic() + 30
    # Settled once no compaction has landed for a second (the token trigger leaves up to
    # the threshold uncovered, so "everything covered" never comes).
    while time.monotonic() < deadline:
        time.sleep(0.05)
        session = client.get_session("travel_app", "jonas", sid)
        now = [e for e in session.events if e["type"] == "compaction"]
        if len(now) != len(compactions):
            compactions, landed = now, time.perf_counter()
        elif compactions and time.perf_counter() - landed >= 1.0:
            break
    covered = {i for c in compactions for i in c["data"]["source_event_ids"]}
    print(
        f"{len(compactions)} compaction events landed in the background, covering "
        f"{len(covered)} of {turns} events ({landed - t0:.2f} s after the first append "
        "for the last)"
    )
    req = client.compile(
        "travel_app", "jonas", sid, {"name": "planner"}, new_message="Which hotel did we settle on?"
    )
    history = next(s for s in req.trace if s.name == "history")
    detail = history.detail
    summaries = len(detail["compactions"])
    print(
        f"compiled: total_tokens {req.total_tokens}, of which history "
        f"{history.tokens_added}: {summaries} summaries (compression "
        f"{detail.get('compression_ratio')}x) + {detail['events'] - summaries} raw events"
    )
    t1 = time.perf_counter()
    ended = client.end_session("travel_app", "jonas", sid)
    job_id = ended.job_id  # type: ignore[union-attr]  # wait=False: queued, with its id
    print(f"POST :end -> job {job_id} in {1000 * (time.perf_counter() - t1):.0f} ms")
    job = client.wait_for_job("travel_app", "jonas", job_id)
    print(
        f"GET /v1/jobs/{job_id}: {job.status}, memories_added "
        f"{job.memories_added} ({time.perf_counter() - t1:.2f} s after :end)"
    )
    hits = client.recall("travel_app", "jonas", "what is Jonas allergic to?", top_k=1)
    for m in hits.memories:
        print(f"recall 'what is Jonas allergic to?': {m.text[:90]}")
    return sid


def _screenshots(base_url: str, out: Path, session_id: str) -> None:
    """The memory inspector (``/ui``) of the live loop's user, one PNG per view, taken in
    the system's Chromium; without one the demo says so and goes on."""
    from mnemoray.ui.browser import BrowserMissing
    from mnemoray.ui.screenshots import take_screenshots

    print(f"\n=== memory inspector: {base_url}/ui/?app_name=travel_app&user_id=jonas ===")
    try:
        paths = take_screenshots(
            base_url, out, "travel_app", "jonas", session_id, "what is Jonas allergic to?"
        )
    except BrowserMissing as exc:
        print(f"screenshots skipped: {exc} (`make test-browser` installs Chromium)")
        return
    print(f"screenshots of {len(paths)} views in {out}: {', '.join(p.name for p in paths)}")


if __name__ == "__main__":
    main()
