"""MemoryBackend: what the service, the backfill and the store commands need of a store.

Two implementations, chosen by the store's location (:func:`open_backend`):

- ``DIR`` or ``parquet://DIR``: :class:`~mnemoray.memory.store.parquet.store.MemoryStore`, Parquet
  segments + FAISS indexes committed by one manifest (the default);
- ``lancedb://DIR``: :class:`~mnemoray.memory.store.lance.LanceStore`, LanceDB tables in
  ``DIR`` (embedded, no server; the ``lancedb`` extra).

A plain path opens whichever kind of store is already there (a new one is Parquet).

Writes are two-phase so a Ray worker can prepare and the driver commit:
``prepare_segments`` returns a picklable :class:`PreparedWrite`, ``commit`` publishes it
together with the ledger entries of the sessions it came from. Reads go through a
:class:`MemoryView` of one committed version; the :class:`~mnemoray.memory.recall.retriever.
Retriever` ranks a user's rows (an Arrow table + vectors per span, see
``user_spans``) with the same one function for every backend.

What a store can do beyond that, callers ask the store, never its backend name:
``has_graph`` says whether it keeps users' entity graphs (a session's graph evidence then
commits with its rows: ``commit(graph=)``, merged ahead by ``prepare_graph``). Features
only the Parquet store has (compaction, gc, doctor, sharded Serve deployments) call
:func:`require_parquet`, which raises :class:`~mnemoray.errors.Unsupported` naming the
feature for any other backend.
How the backends differ: docs/backends.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from mnemoray.errors import ConfigError, Unsupported
from mnemoray.extras import install_hint
from mnemoray.locations import local_location
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.graph.commit import GraphWrite
from mnemoray.memory.store.graph.prepared import PreparedPart
from mnemoray.memory.store.layout import MANIFEST
from mnemoray.memory.store.manifest import Manifest, read_manifest
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.reload import Stamp
from mnemoray.memory.store.segment import LoadedSegment, Range
from mnemoray.memory.store.snapshot import Hit, MaskFn, StoreSnapshot
from mnemoray.memory.store.tombstones import Tombstone
from mnemoray.memory.store.writes import OwnedId, SessionKey, WriteResult

if TYPE_CHECKING:
    from mnemoray.memory.records.filters import RecallFilters

SCHEMES = ("parquet", "lancedb")
# The file a LanceDB store keeps its head in (its commit point: see mnemoray.memory.store.lance).
LANCE_HEAD = "lancedb.json"


class MemoryView(Protocol):
    """A read-only view of one committed version of a store.

    Forgotten and expired rows are never returned. ``manifest`` is the version's
    head: ``version``, ``embedding_model``/``dim``/``keyword_only``, ``summarizer``,
    ``shards`` and ``tombstones`` (names of forget files: with ``version``, what
    tells the Retriever's candidate cache that a user's rows may have changed).
    """

    manifest: Manifest
    segments: list[list[LoadedSegment]]  # per shard; a backend without segment files: none
    tombstones: list[Tombstone]  # forget records (reason, actor) of this version

    @property
    def version(self) -> int: ...

    def check_healthy(self) -> None:
        """Raise StoreCorrupt if part of the store cannot be read (no partial answers)."""

    def user_spans(self, app: str, user: str) -> list[tuple[LoadedSegment, Range]]:
        """The user's rows: a row range of each segment holding some (table + vectors)."""

    def app_spans(self, app: str) -> list[tuple[LoadedSegment, Range]]:
        """The app's rows, in the same form."""

    def forgotten(self, seg: LoadedSegment) -> np.ndarray | None:
        """Mask of ``seg``'s rows a forget hides (None: none; rows deleted for real)."""

    def count(
        self, app: str | None = None, user: str | None = None, now: float | None = None
    ) -> int: ...

    def rows_for_user(self, app: str, user: str, now: float | None = None) -> list[Memory]:
        """The user's live memories, oldest first."""

    def iter_memories(
        self, app: str | None = None, user: str | None = None, batch: int = 2048
    ) -> Iterator[Memory]: ...

    def tenants(self) -> list[tuple[str, str]]:
        """Every (app, user) with stored rows, sorted."""

    def get(self, memory_id: str, owner: tuple[str, str] | None = None) -> Memory | None: ...

    def search_app(
        self,
        app: str,
        query_vec: np.ndarray,
        k: int = 10,
        mask_fn: MaskFn | None = None,
        *,
        filters: RecallFilters | None = None,
    ) -> list[Hit]:
        """Nearest ``k`` live memories of an app (any user) to a unit query vector."""


@runtime_checkable
class PreparedWrite(Protocol):
    """Rows validated and staged by ``prepare_segments``, invisible until committed
    (picklable: a Ray worker prepares, the driver commits)."""

    @property
    def segment_count(self) -> int: ...


@runtime_checkable
class MemoryBackend(Protocol):
    """A memory store: two-phase writes with a session ledger, forget, read views."""

    backend: str  # "parquet" | "lancedb": for reports; capabilities are asked below
    # Keeps users' entity graphs: ``graph``/``prepared_graph`` commit with the rows and
    # ``prepare_graph`` merges ahead. Without one (LanceDB) they refuse a non-empty graph.
    has_graph: bool
    root: Path  # the store's directory (run records, quarantine, hygiene files go there)
    shards: int
    load_shards: frozenset[int] | None  # a Parquet store serving some shards only

    @property
    def uri(self) -> str:
        """The location :func:`open_backend` reopens this store from (in a worker)."""

    def manifest(self) -> Manifest:
        """The committed head: version, embedding model and dim, summarizer."""

    def stamp(self) -> Stamp:
        """Cheap token that changes whenever a commit publishes (reloaders compare it)."""

    # A MemoryView; both backends' views are StoreSnapshots (LanceView subclasses it),
    # which is what the reloader and the Retriever hold.
    def load(self) -> StoreSnapshot: ...

    # -- writes ------------------------------------------------------------------
    def prepare_segments(
        self, memories: Sequence[Memory], embedding_model: str, dim: int, index_kind: Any = "auto"
    ) -> PreparedWrite:
        """Check and stage ``memories`` (those already stored are skipped)."""

    def commit(
        self,
        pending: Any = None,
        *,
        session_hashes: Iterable[str] = (),
        run_id: str | None = None,
        summarizer: str | None = None,
        graph: GraphWrite = (),
        prepared_graph: Sequence[PreparedPart] = (),
    ) -> WriteResult:
        """Publish ``pending`` and the sessions' ledger entries (see each backend for how
        atomic); rows another writer committed meanwhile are skipped. ``graph``: (session
        hash, graph extract) merged into the users' graphs in the same commit;
        ``prepared_graph``: that merge done ahead by ``prepare_graph`` (``has_graph``)."""

    def prepare_graph(self, graph: GraphWrite) -> tuple[PreparedPart, ...]:
        """Merge ``graph`` into its users' graphs ahead of the commit (a backfill's worker),
        uncommitted until ``commit(..., prepared_graph=)`` lists it (``has_graph``)."""

    def write_segment(
        self,
        memories: Sequence[Memory],
        embedding_model: str,
        dim: int,
        *,
        index_kind: Any = "auto",
        session_hashes: Iterable[str] = (),
        run_id: str | None = None,
        summarizer: str | None = None,
        graph: GraphWrite = (),
    ) -> WriteResult:
        """Prepare and commit in one step (``graph`` as in ``commit``)."""

    def written_hashes(self, result: WriteResult) -> set[str]:
        """Content hashes of the rows ``result``'s write committed."""

    def sessions_with_rows(self, keys: set[SessionKey]) -> set[SessionKey]:
        """Of ``keys``, the sessions the store holds rows of (a backfill's supersede check)."""

    def drop_sessions(self, pending: Any, sessions: set[SessionKey]) -> Any:
        """``pending`` without the rows of ``sessions`` (still uncommitted)."""

    # -- ledger, forget, quarantine, transfer ----------------------------------------
    def ledger_contains(self, session_hashes: Iterable[str]) -> set[str]: ...

    def ledger_add(self, session_hashes: Iterable[str], run_id: str | None = None) -> int: ...

    def forget(
        self,
        memory_ids: Iterable[str] = (),
        session: tuple[str, str, str] | None = None,
        user: tuple[str, str] | None = None,
        *,
        owner: tuple[str, str] | None = None,
        owned: Iterable[OwnedId] = (),
        reason: str = "",
        actor: str = "",
    ) -> int:
        """Remove memories for good; how many live ones went."""

    def quarantine(self, rows: Sequence[Mapping[str, Any]]) -> int: ...

    def export_jsonl(self, path: str | Path) -> int: ...

    def import_jsonl(self, path: str | Path, batch_size: int = ...) -> WriteResult: ...


#: What a memory store location may be, for the message that refuses any other.
SUPPORTED = "a directory, parquet://DIR or lancedb://DIR"


def _split(location: str | Path) -> tuple[str | None, str]:
    """(scheme or None, directory) of a location; any URL but ours is refused (a
    ``s3://`` would otherwise become a directory of that name)."""
    if not isinstance(location, str | Path) or not str(location):
        raise ConfigError(
            f"expected a path or a parquet:// / lancedb:// URI, got {location!r}", field="store"
        )
    text = local_location(location, field="store", supported=SUPPORTED, schemes=SCHEMES)
    scheme, sep, rest = text.partition("://")
    return (scheme.lower(), rest) if sep else (None, text)


def parse_location(location: str | Path) -> tuple[str, Path]:
    """(backend, directory) of a store location: ``DIR``, ``parquet://DIR`` or
    ``lancedb://DIR``. A plain path names the kind of store already there (a new one
    is Parquet); a scheme that contradicts the store there is an error."""
    scheme, text = _split(location)
    if not text:
        raise ConfigError(f"{scheme}:// names no directory", field="store")
    root = Path(text)
    found = (
        "lancedb"
        if (root / LANCE_HEAD).is_file()
        else "parquet"
        if (root / MANIFEST).is_file()
        else None
    )
    if scheme is not None and found is not None and found != scheme:
        raise ConfigError(
            f"{scheme}:// names a directory that holds a {found} store; "
            f"open it as {found}://{text} or a plain path",
            field="store",
        )
    return scheme or found or "parquet", root


def missing_store(location: str | Path) -> str | None:
    """Why no store is at ``location`` (one line), or None when there is one. A Parquet
    directory with store files but no manifest raises StoreCorrupt (a damaged store,
    not a missing one: `mnemoray doctor --repair`)."""
    kind, root = parse_location(location)
    head = LANCE_HEAD if kind == "lancedb" else MANIFEST
    if (root / head).is_file():
        return None
    if kind == "parquet" and root.is_dir():
        read_manifest(root)  # raises when store files are there without a manifest
    return f"no memory store at {location} (no {head})"


def absolute_location(location: str) -> str:
    """``location`` with its directory absolute (``~`` expanded) and its scheme kept: a
    setting that names the same store from any working directory."""
    scheme, text = _split(location)
    if not text:
        raise ConfigError(f"{scheme}:// names no directory", field="store")
    if scheme is not None:
        return f"{scheme}://{Path(text).expanduser().absolute()}"
    return str(Path(text).expanduser().absolute())


def open_backend(
    location: str | Path | MemoryBackend,
    shards: int | None = None,
    *,
    load_shards: Iterable[int] | None = None,
) -> MemoryBackend:
    """The store at ``location`` (see :func:`parse_location`); a backend passes through.

    ``shards`` / ``load_shards``: the Parquet store's sharding; a LanceDB store is one
    table, so it takes neither (``Unsupported`` naming the setting).
    """
    if isinstance(location, MemoryBackend):
        return location
    kind, root = parse_location(location)
    if kind == "parquet":
        return MemoryStore(root, shards, load_shards=load_shards)
    if load_shards is not None:
        raise Unsupported(
            "a LanceDB store is one table: serving some shards of it "
            "(index_mode sharded) needs a Parquet store",
            field="load_shards",
        )
    if shards is not None and shards != 1:
        raise Unsupported(f"a LanceDB store is not sharded; drop shards ({shards})", field="shards")
    try:
        from mnemoray.memory.store.lance import LanceStore
    except ModuleNotFoundError as exc:
        raise ConfigError(install_hint(exc) or str(exc), field="store") from exc
    return LanceStore(root)


def require_parquet(store: MemoryBackend, feature: str) -> MemoryStore:
    """``store`` as the Parquet store ``feature`` needs, else :class:`Unsupported`."""
    if isinstance(store, MemoryStore):
        return store
    raise Unsupported(
        f"{feature} needs a Parquet store; {store.uri} is a {store.backend} store", field="store"
    )


__all__ = [
    "LANCE_HEAD",
    "SCHEMES",
    "MemoryBackend",
    "MemoryView",
    "PreparedWrite",
    "absolute_location",
    "missing_store",
    "open_backend",
    "parse_location",
    "require_parquet",
]
