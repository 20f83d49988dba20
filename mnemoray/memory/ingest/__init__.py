"""Ingestion: when sessions become memories (triggers), and the durable job queue and
worker that distill them off the request path."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "IngestionTrigger": "mnemoray.memory.ingest.triggers",
    "Job": "mnemoray.memory.ingest.job",
    "JobQueue": "mnemoray.memory.ingest.queue",
    "JobWorker": "mnemoray.memory.ingest.worker",
    "PendingBound": "mnemoray.memory.ingest.job",
    "QueueFull": "mnemoray.memory.ingest.job",
    "RetentionPolicy": "mnemoray.memory.ingest.job",
    "RetryPolicy": "mnemoray.memory.ingest.job",
    "TriggerConfig": "mnemoray.memory.ingest.triggers",
    "guard_jobs": "mnemoray.memory.ingest.guard",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
