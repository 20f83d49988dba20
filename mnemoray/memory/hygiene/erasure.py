"""Delete a session, or forget everything about a user: memories, sessions, artifacts, jobs.

The one place these rules live: the HTTP backends (``mnemoray.http.parts``) call
:class:`Erasure` over the parts they hold; the CLI (``mnemoray memory forget-user``) and
the MCP server's local store open those of a store directory with :func:`store_erasure`. Memories
go through the memory operations (``forget_session`` / ``forget_user``), so the graph, the
hygiene cascade to consolidated summaries and a sharded ``Index`` see the same forget a
``DELETE .../memories`` makes.

Order of a user's erasure, each step idempotent so a run that crashed midway is finished
by running it again (which answers zeros for what is already gone):

1. jobs: the user's queued and failed ingestion jobs are cancelled (their stored input
   dropped) and the erasure is recorded, so a job running now takes back what it writes;
2. sessions: once they are gone no trigger or retry can queue a job that re-reads one;
3. artifacts: every one of the user's, of any session (deleted ones too) and ``user:``;
4. memories, last: the user tombstone hides every memory written before it (by a job that
   raced the steps above too) and is the erasure's record (``GET /v1/memories/forgotten``):
   it names no id and keeps no text, and exists only once the steps before it are done.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemoray.artifacts.store import ArtifactStore
from mnemoray.memory.ingest.guard import JOBS_DB
from mnemoray.memory.ingest.queue import JobQueue
from mnemoray.postgres import is_postgres_url
from mnemoray.sessions.store import SessionStore
from mnemoray.sessions.types import SessionNotFoundError

#: ``memory_op(op, app_name, user_id, **kwargs)``: one tenant-scoped memory operation.
MemoryOp = Callable[..., Any]

#: The reason on the forget record of a full erasure (then ": <the caller's reason>").
ERASED = "erased: every memory, session, artifact and job of the user"
#: The reason on the forget record of a deleted session's memories.
SESSION_DELETED = "session deleted"


def _why(base: str, reason: str) -> str:
    return f"{base}: {reason}" if reason else base


@dataclass(frozen=True)
class Erasure:
    """Deletes over one server's (or one store directory's) parts; a part that is None
    (no job queue yet, no artifacts directory) has nothing to remove."""

    sessions: SessionStore | None
    artifacts: ArtifactStore | None
    jobs: JobQueue | None
    memory_op: MemoryOp

    def delete_session(
        self, app_name: str, user_id: str, session_id: str, *, actor: str = ""
    ) -> dict[str, Any]:
        """Delete one session of the user: its queued jobs, its memories, its own
        artifacts (the user's ``user:`` ones stay), then the session itself, so a rerun
        after a crash finds it and finishes. SessionNotFoundError when the user has no
        such session (another user's counts as none)."""
        if self.sessions is None:
            raise SessionNotFoundError(app_name, user_id, session_id)
        session = self.sessions.get_session(app_name, user_id, session_id)
        jobs = 0 if self.jobs is None else self.jobs.forget_owner(app_name, user_id, session_id)
        memories = self.memory_op(
            "forget_session",
            app_name,
            user_id,
            session_id=session_id,
            reason=SESSION_DELETED,
            actor=actor,
        )
        artifacts = (
            0
            if self.artifacts is None
            else self.artifacts.delete_session_artifacts(app_name, user_id, session_id)
        )
        # The memories are forgotten above: the trigger's forget on "deleted" would repeat it.
        with contextlib.suppress(SessionNotFoundError):  # a concurrent delete won
            self.sessions.delete_session(app_name, user_id, session_id, notify=False)
        if self.jobs is not None:
            # A trigger may have queued a job while the session still existed: marked
            # now, it takes back what it writes (a tombstone hides only older segments).
            jobs += self.jobs.forget_owner(app_name, user_id, session_id)
        return {
            "session_id": session_id,
            "deleted_at": time.time(),
            "removed": {
                "events": len(session.events),
                "artifacts": artifacts,
                "jobs": jobs,
                "memories": int(memories),
            },
        }

    def forget_user(
        self, app_name: str, user_id: str, *, reason: str = "", actor: str = ""
    ) -> dict[str, Any]:
        """Forget everything about the user, in the order of the module's docstring:
        ``{"app_name", "user_id", "erased_at", "removed": {"jobs", "sessions", "events",
        "artifacts", "memories"}}``. Another user's data is never read or named."""
        jobs = 0 if self.jobs is None else self.jobs.forget_owner(app_name, user_id)
        sessions = events = 0
        if self.sessions is not None:
            for info in self.sessions.list_sessions(app_name, user_id):
                if (info.app_name, info.user_id) != (app_name, user_id):
                    continue  # never another user's, whatever a store answers
                try:
                    self.sessions.delete_session(app_name, user_id, info.session_id, notify=False)
                except SessionNotFoundError:  # a concurrent delete won
                    continue
                sessions += 1
                events += info.num_events
        artifacts = 0 if self.artifacts is None else self.artifacts.delete_user(app_name, user_id)
        memories = self.memory_op(
            "forget_user", app_name, user_id, reason=_why(ERASED, reason), actor=actor
        )
        if self.jobs is not None:
            # A job queued while the sessions were being deleted: marked now, it takes
            # back what it writes (the tombstone above hides only older segments).
            jobs += self.jobs.forget_owner(app_name, user_id)
        return {
            "app_name": app_name,
            "user_id": user_id,
            "erased_at": time.time(),
            "removed": {
                "jobs": jobs,
                "sessions": sessions,
                "events": events,
                "artifacts": artifacts,
                "memories": int(memories),
            },
        }


__all__ = ["ERASED", "SESSION_DELETED", "Erasure", "MemoryOp"]


@contextlib.contextmanager
def store_erasure(
    memory_op: MemoryOp, sessions_db: str | Path, artifacts_dir: str | Path
) -> Iterator[Erasure]:
    """An :class:`Erasure` over a store directory's parts as the server keeps them: the
    session database, the artifacts folder and ``jobs.db`` beside the sessions. A part
    the store never had has nothing to remove, and none is created here."""
    from mnemoray.artifacts.files import FileArtifactStore
    from mnemoray.memory.ingest.postgres_queue import PostgresJobQueue
    from mnemoray.sessions.backends import open_session_store

    art = Path(artifacts_dir)
    sessions: SessionStore | None
    jobs: JobQueue | None
    if is_postgres_url(sessions_db):  # sessions and jobs in one database
        sessions = open_session_store(str(sessions_db))
        try:
            jobs = PostgresJobQueue(str(sessions_db))
        except BaseException:
            sessions.close()
            raise
    else:
        db = Path(sessions_db)
        jobs_db = db.parent / JOBS_DB
        sessions = open_session_store(db) if db.is_file() else None
        jobs = JobQueue(jobs_db) if jobs_db.is_file() else None
    try:
        yield Erasure(sessions, FileArtifactStore(art) if art.is_dir() else None, jobs, memory_op)
    finally:
        for part in (sessions, jobs):
            if part is not None:
                part.close()
