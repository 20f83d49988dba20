"""A throwaway PostgreSQL server for the tests and benchmarks: a cluster initialised in
a temporary directory, started on a free local port, stopped and removed at the end.

PostgreSQL refuses to run as root (CI runs as root): then the server runs as the
``postgres`` system user where the image has one, else ``nobody``. The binaries are
PostgreSQL 15's (``/usr/lib/postgresql/15/bin``) unless ``MNEMORAY_PG_BIN`` names
others; without them :class:`PostgresMissing` says what to install.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

DEFAULT_BIN = "/usr/lib/postgresql/15/bin"
SUPERUSER = "mnemoray"


class PostgresMissing(RuntimeError):
    """The server binaries are not installed."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> str | None:
    """The user to run the server as: None for this one, when it is not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise PostgresMissing("running as root and no postgres or nobody user to run PostgreSQL as")


class LocalPostgres:
    """One server; :meth:`database` makes a fresh empty database and returns its URL.

    ``durable=False`` (the tests) turns fsync off: a crash of the test machine loses
    nothing that matters, and commits cost no disk flush. Benchmarks keep it on.
    """

    def __init__(self, *, durable: bool = False, max_connections: int = 200) -> None:
        bindir = Path(os.environ.get("MNEMORAY_PG_BIN", DEFAULT_BIN))
        self.pg_ctl, initdb = bindir / "pg_ctl", bindir / "initdb"
        if not (self.pg_ctl.is_file() and initdb.is_file()):
            raise PostgresMissing(
                f"PostgreSQL server binaries not found in {bindir}: "
                "apt-get install postgresql (or set MNEMORAY_PG_BIN to their directory)"
            )
        self.user = _run_as()
        self.root = Path(tempfile.mkdtemp(prefix="mnemoray-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run(
            [
                str(initdb),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ]
        )
        options = [
            f"-p {self.port}",
            "-c listen_addresses=127.0.0.1",
            f"-c unix_socket_directories={self.root}",
            f"-c max_connections={max_connections}",
        ]
        if not durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run(
            [
                str(self.pg_ctl),
                "-D",
                str(self.data),
                "-l",
                str(self.root / "server.log"),
                "-o",
                " ".join(options),
                "-w",
                "-t",
                "60",
                "start",
            ]
        )
        self.url = f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(
            argv, user=self.user, capture_output=True, text=True, cwd=self.root, check=False
        )
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{argv[0]} failed: {done.stderr or done.stdout}{tail}")

    def database(self) -> str:
        """A new empty database on this server; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        deadline = time.monotonic() + 30
        try:
            self._run([str(self.pg_ctl), "-D", str(self.data), "-m", "fast", "-w", "stop"])
        finally:
            while time.monotonic() < deadline and (self.data / "postmaster.pid").exists():
                time.sleep(0.1)
            shutil.rmtree(self.root, ignore_errors=True)
