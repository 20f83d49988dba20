"""A psycopg 3 connection pool for one ``postgresql://`` location.

Every connection starts outside a transaction (autocommit); a writer opens one
explicitly (``with conn.transaction():``), so nothing is left open between calls. Its
``search_path`` is the ``mnemoray`` schema, where every table of the project lives: the
database may hold others' tables, and ours never collide with them.
A server that cannot be reached is :class:`~mnemoray.errors.Unavailable`, named by
the location without its credentials.
"""

from __future__ import annotations

import os
from typing import Any

from mnemoray.errors import ConfigError, Unavailable
from mnemoray.locations import shown, url_scheme
from mnemoray.postgres.migrations import SCHEMA, Migrations

#: The URL schemes a PostgreSQL location may have (libpq accepts both).
SCHEMES = ("postgresql", "postgres")


def is_postgres_url(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a file."""
    return url_scheme(location) in SCHEMES


def open_pool(
    url: str,
    *,
    field: str,
    migrations: Migrations | None = None,
    min_size: int = 1,
    max_size: int = 8,
    timeout_s: float = 30.0,
) -> Any:
    """An open ``psycopg_pool.ConnectionPool`` for ``url``, its first connection made (a
    wrong host or password fails here, not on the first request), and ``migrations``
    applied through it (a failed one closes the pool)."""
    if not is_postgres_url(url):
        raise ConfigError(f"{shown(url)} is not a postgresql:// URL", field=field)
    try:
        import psycopg
        from psycopg_pool import ConnectionPool, PoolTimeout
    except ImportError as exc:
        raise ConfigError(
            f"{shown(url)} needs the PostgreSQL driver: pip install 'mnemoray[postgres]'",
            field=field,
        ) from exc
    try:  # one plain connection first: a refused or rejected one fails now, saying why
        psycopg.connect(url, connect_timeout=max(1, round(timeout_s))).close()
    except psycopg.OperationalError as exc:
        reason = (str(exc).strip().splitlines() or ["no reason given"])[0]
        raise Unavailable(f"cannot connect to {shown(url)}: {reason}", field=field) from exc
    pool = ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout_s,
        kwargs={"autocommit": True, "options": f"-c search_path={SCHEMA}"},
        open=False,
        name=f"mnemoray-{field}",
    )
    try:
        pool.open(wait=True, timeout=timeout_s)
    except PoolTimeout as exc:
        pool.close()
        raise Unavailable(
            f"cannot connect to {shown(url)} within {timeout_s:g} s", field=field
        ) from exc
    if migrations is not None:
        try:
            with pool.connection() as conn:
                migrations.apply(conn, field=field)
        except BaseException:
            pool.close()
            raise
    return pool
