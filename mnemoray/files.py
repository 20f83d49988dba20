"""Crash-safe file writes and the store's commit lock.

A reader must never see a half-written manifest, segment or index: every
file is written under a temporary name, fsynced, then renamed into place,
and the directory is fsynced so the rename itself survives a power cut.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path_for(path: Path) -> Path:
    # Same directory as the target so the rename is atomic (one filesystem).
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Call ``write(tmp)`` then publish ``tmp`` as ``path`` in one rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path_for(path)
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock shared by processes and threads on one host.

    flock locks belong to an open file description, so two threads of one
    process that each open the file exclude each other too.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
