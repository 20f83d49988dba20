"""PostgreSQL for what many processes on many nodes share: live sessions and the
ingestion queue (docs/operations.md, "More than one node").

One connection pool per location (:func:`open_pool`), and a schema each component
creates and migrates itself through versioned steps (:class:`Migrations`).
"""

from mnemoray.postgres.migrations import Migrations
from mnemoray.postgres.pool import SCHEMES, is_postgres_url, open_pool

__all__ = ["SCHEMES", "Migrations", "is_postgres_url", "open_pool"]
