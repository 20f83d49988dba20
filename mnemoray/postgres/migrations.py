"""Versioned schema migrations for one component's tables in a PostgreSQL database.

A component (``sessions``, ``jobs``) lists its steps in order; step *n* takes its
tables from version *n* to *n + 1*. :meth:`Migrations.apply` runs the missing steps in
one transaction under one advisory lock, so replicas starting together migrate once and
a failed step leaves the schema as it was. A database newer than this code refuses to
open rather than be written in a shape the code does not know.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mnemoray.errors import ConfigError

#: The PostgreSQL schema (namespace) that holds every table the project makes.
SCHEMA = "mnemoray"
_LOCK = zlib.crc32(b"mnemoray:schema")
_VERSIONS = """CREATE TABLE IF NOT EXISTS schema_versions (
    component  text PRIMARY KEY,
    version    integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now())"""


@dataclass(frozen=True)
class Migrations:
    """The schema of ``component``: ``steps[n]`` are the statements of version n -> n+1."""

    component: str
    steps: Sequence[Sequence[str]]

    @property
    def version(self) -> int:
        return len(self.steps)

    def apply(self, conn: Any, *, field: str) -> int:
        """Bring ``conn``'s database up to :attr:`version`; the version it was at."""
        with conn.transaction():
            # One lock for every component: the version table is created under it too
            # (two CREATE TABLE IF NOT EXISTS at once can still collide).
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            conn.execute(_VERSIONS)
            row = conn.execute(
                "SELECT version FROM schema_versions WHERE component = %s", (self.component,)
            ).fetchone()
            found = 0 if row is None else int(row[0])
            if found > self.version:
                raise ConfigError(
                    f"the {self.component} schema is at version {found}, this mnemoray "
                    f"knows versions up to {self.version}: upgrade mnemoray",
                    field=field,
                )
            for step in self.steps[found:]:
                for statement in step:
                    conn.execute(statement)
            if found < self.version:
                conn.execute(
                    "INSERT INTO schema_versions (component, version) VALUES (%s, %s) "
                    "ON CONFLICT (component) DO UPDATE SET version = excluded.version, "
                    "updated_at = now()",
                    (self.component, self.version),
                )
        return found
