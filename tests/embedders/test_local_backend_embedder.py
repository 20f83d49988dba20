"""The local backend (``mnemoray ui``) loads its embedding model once: queries are
embedded by the write embedder when the query spec is the write spec; another query
spec still gets its own instance, checked to be the write model; a Serve replica's
parts keep their own query embedder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemoray.embedders import EmbedderError, EmbedderSpec, resolve
from mnemoray.http.local_backend import LocalBackend
from mnemoray.http.models import local_embedder, local_summarizer
from mnemoray.http.parts import build_parts
from mnemoray.settings.serve import parse_settings


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[EmbedderSpec]:
    """Every model the real loader loads from now on (the process cache starts empty)."""
    seen: list[EmbedderSpec] = []
    real: Callable[..., Any] = resolve._load

    def counted(spec: EmbedderSpec, spin: bool, onnx_threads: int | None) -> Any:
        seen.append(spec)
        return real(spec, spin, onnx_threads)

    monkeypatch.setattr(resolve, "_cache", {})
    monkeypatch.setattr(resolve, "_load", counted)
    return seen


def test_the_local_backend_loads_its_model_once(tmp_path: Path, loads: list[EmbedderSpec]) -> None:
    backend = LocalBackend.open(str(tmp_path / "store"))
    try:
        parts = backend.parts
        assert parts.write_embedder is not None
        assert parts.query_embedder is parts.write_embedder
        assert len(loads) == 1
    finally:
        backend.close()


def test_another_query_spec_gets_its_own_checked_instance(
    tmp_path: Path, loads: list[EmbedderSpec]
) -> None:
    backend = LocalBackend.open(str(tmp_path / "store"), models={"query_threads": 1})
    try:
        q, w = backend.parts.query_embedder, backend.parts.write_embedder
        assert q is not None and w is not None and q is not w
        assert (q.model_id, q.dim) == (w.model_id, w.dim)
        assert [spec.threads for spec in loads] == [None, 1]
    finally:
        backend.close()
    # A query spec of another model is refused (here: keyword-only queries over an
    # embedding store), and nothing is left open.
    with pytest.raises(EmbedderError) as exc:
        LocalBackend.open(str(tmp_path / "store"), models={"query_embedder": "none"})
    assert exc.value.field == "models.query_embedder"


def test_a_serve_replica_keeps_its_own_query_embedder(
    tmp_path: Path, loads: list[EmbedderSpec]
) -> None:
    s = parse_settings({"store": str(tmp_path / "store")})
    parts = build_parts(s, local_embedder(s), local_summarizer(s))  # as MemoryIngress
    try:
        q, w = parts.query_embedder, parts.write_embedder
        assert q is not None and w is not None and q is not w
        assert len(loads) == 2
    finally:
        parts.stop()
