"""The PostgreSQL session store's tables, as versioned migrations.

Same rows as the SQLite store (mnemoray/sessions/sqlite/rows.py): JSON kept as the
exact text the store wrote (``text``, not ``jsonb``, which would reorder keys), times
as epoch seconds; the tables live in the ``mnemoray`` schema
(:mod:`mnemoray.postgres.pool`). ``created_seq`` lists sessions in creation order, as
SQLite's rowid.
"""

from __future__ import annotations

from mnemoray.postgres import Migrations

MIGRATIONS = Migrations(
    "sessions",
    [
        (
            """CREATE TABLE sessions (
                app_name      text NOT NULL,
                user_id       text NOT NULL,
                session_id    text NOT NULL,
                created_seq   bigint GENERATED ALWAYS AS IDENTITY,
                state         text NOT NULL,
                created_at    double precision NOT NULL,
                updated_at    double precision NOT NULL,
                ended_at      double precision,
                version       integer NOT NULL,
                created_state text,
                PRIMARY KEY (app_name, user_id, session_id))""",
            "CREATE INDEX sessions_created ON sessions (app_name, created_seq)",
            """CREATE TABLE events (
                app_name   text NOT NULL,
                user_id    text NOT NULL,
                session_id text NOT NULL,
                seq        integer NOT NULL,
                event_id   text NOT NULL,
                body       text NOT NULL,
                PRIMARY KEY (app_name, user_id, session_id, seq),
                UNIQUE (app_name, user_id, session_id, event_id),
                FOREIGN KEY (app_name, user_id, session_id)
                    REFERENCES sessions ON DELETE CASCADE)""",
            """CREATE TABLE app_state (
                app_name text NOT NULL,
                key      text NOT NULL,
                value    text NOT NULL,
                PRIMARY KEY (app_name, key))""",
            """CREATE TABLE user_state (
                app_name text NOT NULL,
                user_id  text NOT NULL,
                key      text NOT NULL,
                value    text NOT NULL,
                PRIMARY KEY (app_name, user_id, key))""",
        ),
    ],
)
