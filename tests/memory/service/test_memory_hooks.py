"""Memory lifecycle hooks: what they are told, that a failing, slow or flooded hook
never breaks or blocks the memory path, and the webhook that posts events."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mnemoray.http.metrics import Metrics
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.hooks import MemoryEvent, MemoryHooks
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.service.webhook import Webhook
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers import ExtractiveSummarizer
from tests.support.factories import parrot


@pytest.fixture
def service(tmp_path) -> MemoryService:
    svc = MemoryService(MemoryStore(tmp_path / "store"), None, ExtractiveSummarizer())
    yield svc
    svc.close()


# -- hooks --------------------------------------------------------------------------------
def test_hooks_see_created_recalled_and_forgotten(service) -> None:
    seen: list[MemoryEvent] = []
    for register in (
        service.on_memory_created,
        service.on_memory_recalled,
        service.on_memory_forgotten,
    ):
        register(seen.append)
    added = service.add_session(parrot())
    results = service.search("app", "alice", "parrot apartment", top_k=3)
    service.preview_forget("app", "alice", "parrot", top_k=2)  # a look, not a recall
    assert service.forget_session("app", "alice", "parrot", reason="done", actor="me")
    assert service.hooks.flush(10)
    assert [e.hook for e in seen] == [
        "on_memory_created",
        "on_memory_recalled",
        "on_memory_forgotten",
    ]
    created, recalled, forgotten = seen
    assert set(created.memory_ids) == {m.memory_id for m in added}
    assert all(m.embedding is None for m in created.memories)
    assert recalled.memory_ids == tuple(r.memory.memory_id for r in results)
    assert recalled.query == "parrot apartment" and recalled.user_id == "alice"
    assert set(forgotten.memory_ids) == {m.memory_id for m in added}
    assert (forgotten.reason, forgotten.actor, forgotten.scope) == ("done", "me", "session")
    assert json.loads(json.dumps(forgotten.to_dict()))["hook"] == "on_memory_forgotten"


def test_a_failing_or_slow_hook_never_breaks_or_blocks_recall(service) -> None:
    service.add_session(parrot())
    release = threading.Event()
    service.on_memory_recalled(lambda ev: 1 / 0)
    service.on_memory_recalled(lambda ev: release.wait(30))
    for _ in range(3):  # the slow hook holds its thread; recall goes on regardless
        assert service.search("app", "alice", "parrot", top_k=2)
    assert not release.is_set()
    release.set()
    assert service.hooks.flush(10)
    stats = service.stats()
    assert stats["hook_errors"] == 3 and stats["hooks_delivered"] == 3
    assert b"mnemoray_memory_hook_errors_total 3.0" in Metrics(service.stats).render()
    with pytest.raises(ValueError, match="hook"):
        service.hooks.register("on_memory_updated", print)


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[dict] = []
    status = 204

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers["Content-Length"])
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_webhook_posts_events_off_the_request_path_and_counts_failures(service) -> None:
    _Receiver.bodies, _Receiver.status = [], 204
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        hook = Webhook(url, timeout_s=5).attach(service.hooks, ["on_memory_forgotten"])
        added = service.add_session(parrot())
        service.forget_memory("app", "alice", added[0].memory_id, reason="gdpr", actor="me")
        assert service.hooks.flush(10) and hook.outbox.flush(10)
        [body] = _Receiver.bodies
        assert (body["hook"], body["memory_ids"], body["reason"]) == (
            "on_memory_forgotten",
            [added[0].memory_id],
            "gdpr",
        )
        _Receiver.status = 500
        service.forget_memory("app", "alice", added[1].memory_id)
        assert service.hooks.flush(10) and hook.outbox.flush(10)
        assert service.stats()["webhook_errors"] == 1
        assert service.stats()["webhook_delivered"] == 1
    finally:
        server.shutdown()


def test_hooks_deliver_in_emission_order(service) -> None:
    got: list[str] = []
    service.on_memory_created(lambda ev: got.append(ev.memory_ids[0]))
    written = [
        service.add_memories([Memory("app", "alice", "online", "fact", f"note {i}")])
        for i in range(20)
    ]
    assert service.hooks.flush(10)
    assert got == [w[0].memory_id for w in written]


def test_a_full_queue_drops_and_counts_instead_of_blocking() -> None:
    hooks = MemoryHooks(max_queue=1)
    entered, release = threading.Event(), threading.Event()

    def stuck(ev: MemoryEvent) -> None:
        entered.set()
        release.wait(30)

    hooks.on_memory_recalled(stuck)
    event = MemoryEvent("on_memory_recalled", "app", "alice", ("m1",))
    hooks.emit(event)
    assert entered.wait(10)  # the thread holds the first event
    hooks.emit(event)  # queued
    hooks.emit(event)  # the queue is full: dropped, not waited for
    assert hooks.stats()["hook_events_dropped"] == 1
    release.set()
    assert hooks.flush(10) and hooks.stats()["hooks_delivered"] == 2
    hooks.stop()


def test_flush_and_stop_are_bounded_and_leave_no_thread_behind() -> None:
    import time

    hooks = MemoryHooks(max_queue=2)
    entered, release = threading.Event(), threading.Event()

    def stuck(ev: MemoryEvent) -> None:
        entered.set()
        release.wait(30)

    hooks.on_memory_recalled(stuck)
    event = MemoryEvent("on_memory_recalled", "app", "alice", ("m1",))
    hooks.emit(event)
    assert entered.wait(10)
    hooks.emit(event)
    hooks.emit(event)  # the queue is full now: stop cannot even queue its marker
    before = threading.active_count()
    for _ in range(3):
        assert hooks.flush(0.05) is False  # timed out ...
    assert threading.active_count() == before  # ... and left no waiter thread behind
    delivery = hooks._thread
    assert delivery is not None and delivery.is_alive()
    start = time.monotonic()
    hooks.stop(timeout_s=0.3)
    assert time.monotonic() - start < 2  # bounded, a stuck hook or not
    release.set()  # the stuck hook returns: the thread ends after that event
    delivery.join(5)
    assert not delivery.is_alive()
