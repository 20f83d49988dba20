"""Which embedder a caller gets: one spec, parsed once, and one entry point.

    spec = EmbedderSpec.parse("default")              # or "none", "torch", "./model,threads=2"
    embedder = open_embedder(spec, store, "query")    # None: keyword-only

Every rule about choosing an embedder lives here:

- model: ``default`` is the store's own model (the packaged all-MiniLM-L6-v2 for a new
  store, or without a store); ``none`` is keyword-only (and a keyword-only store never
  embeds); anything else is a local folder or a hub model name, which must be the
  model the store was built with.
- runtime: ``auto``, the default for every purpose, runs the packaged MiniLM on CPU by
  its parity-gated ONNX Runtime build (same vectors, same ``model_id``) and falls back
  to torch with a logged warning when that build cannot be had; other models on CPU
  run with torch; on a CUDA device it is the packed GPU embedder (``CudaEmbedder``,
  half precision only through its parity gate). ``torch`` or ``onnx`` in the spec
  forces one.
- remote: ``openai,url=...,model=NAME`` embeds on an OpenAI-compatible server; its
  vectors are ``openai:NAME``, another model than any local one, unless the spec says
  ``parity_with=<local model>`` and the server passes the parity gate against it
  when opened (then they carry that model's id, and a store built with it takes them).
- the store-vs-embedder check: :func:`check_model`, used by every caller; what a
  write declares: :func:`write_model`.
- models are loaded once per process and shared (:func:`open_embedder` caches them).

The purpose ("write", "query", "batch") never changes the model or the runtime; it
only sets defaults of ONNX Runtime's threads for queries: a query encoder shares its
cores with a server, so its idle threads do not spin-wait, and it runs
``QUERY_ONNX_THREADS`` intra-op thread, on its own encoder thread beside the server's
event loop (:mod:`mnemoray.embedders.query_encoder`): each has a core, and a batch costs
the least CPU per query on one thread (benchmarks/README.md, "Serve").
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from mnemoray.embedders.base import (
    KEYWORD_ONLY_MODEL,
    PACKAGED_MODEL_ID,
    Embedder,
    EmbedderError,
    ModelMismatch,
)
from mnemoray.embedders.spec import (
    DEFAULT_MODEL,
    REMOTE_ID_PREFIX,
    REMOTE_RUNTIME,
    EmbedderSpec,
)
from mnemoray.errors import InvalidInput

log = logging.getLogger(__name__)

PURPOSES = ("write", "query", "batch")
QUERY_ONNX_THREADS = 1  # ONNX Runtime's intra-op threads for queries, unless the spec sets them


class StoredModel(Protocol):
    """What the resolver reads of a store's manifest: the model its vectors come from."""

    @property
    def embedding_model(self) -> str | None: ...
    @property
    def dim(self) -> int | None: ...
    @property
    def keyword_only(self) -> bool: ...


class StoreWithModel(Protocol):
    """What the resolver needs of a memory store (either kind): its root and manifest."""

    @property
    def root(self) -> Path: ...
    def manifest(self) -> StoredModel: ...


# -- the store's side -------------------------------------------------------------------
def check_model(
    embedder: Embedder | tuple[str, int] | None,
    model: str | None,
    dim: int | None,
    *,
    where: str = "the store",
) -> None:
    """Raise :class:`ModelMismatch` unless ``embedder`` makes the vectors of ``model``/``dim``.

    The one store-vs-embedder check. ``embedder`` may also be the ``(model_id, dim)``
    of a vector made elsewhere; None embeds nothing. ``model`` None (nothing written
    yet) or keyword-only accepts any embedder.
    """
    if embedder is None or model is None or model == KEYWORD_ONLY_MODEL:
        return
    got = embedder if isinstance(embedder, tuple) else (embedder.model_id, embedder.dim)
    if (model, dim) != tuple(got):
        raise ModelMismatch(
            f"{where} embeds with {model!r} (dim {dim}), got {got[0]!r} (dim {got[1]})",
            field="embedder",
        )


def write_model(store: StoreWithModel, embedder: Embedder | None) -> tuple[str, int]:
    """(embedding_model, dim) that a write to ``store`` with ``embedder`` declares."""
    m = store.manifest()
    if embedder is None:
        if m.embedding_model is not None and not m.keyword_only:
            raise ModelMismatch(
                f"store {store.root} embeds with {m.embedding_model!r}; open "
                f"the memory service with that embedder to write to it",
                field="embedder",
            )
        return KEYWORD_ONLY_MODEL, 0
    check_model(embedder, m.embedding_model, m.dim, where=f"store {store.root}")
    return embedder.model_id, embedder.dim


def resolve_spec(
    spec: EmbedderSpec | str | None, store: StoreWithModel | None = None
) -> EmbedderSpec | None:
    """``spec`` resolved against ``store``'s manifest without loading anything.

    None: nothing embeds (keyword-only spec or store). ``default`` becomes the store's
    own model; a spec naming another model than the store's is refused here, before
    a model is loaded. A process that loads the model elsewhere (a Ray actor) is
    handed this.
    """
    spec = EmbedderSpec.parse(spec)
    if spec.model is None:
        return None
    m = store.manifest() if store is not None else None
    if m is None or m.embedding_model is None:
        return spec
    if m.keyword_only:
        return None
    assert store is not None  # m is its manifest
    stored = m.embedding_model
    if spec.remote:
        if spec.parity_model is not None:  # the local model it stands in for: the store's?
            local = resolve_spec(EmbedderSpec(model=spec.parity_model), store)
            return replace(spec, parity_with=local.model if local else spec.parity_with)
        if spec.remote_model_id != stored:
            raise ModelMismatch(
                f"store {store.root} embeds with {stored!r}, not "
                f"{spec.remote_model_id!r} (a server may stand in for a "
                f"local model only with parity_with=<that model>)",
                field="embedder",
            )
        return spec
    if stored.startswith(REMOTE_ID_PREFIX):
        raise ModelMismatch(
            f"store {store.root} embeds with {stored!r} on an "
            f"OpenAI-compatible server; open it with that server's spec "
            f"({REMOTE_RUNTIME},url=...,model={stored[len(REMOTE_ID_PREFIX) :]})",
            field="embedder",
        )
    if spec.model == DEFAULT_MODEL:
        return spec if stored == PACKAGED_MODEL_ID else replace(spec, model=stored)
    if spec.model != stored:
        raise ModelMismatch(
            f"store {store.root} embeds with {stored!r}, not {spec.model!r} "
            f"(use 'default' for the store's own model)",
            field="embedder",
        )
    return spec


# -- opening ----------------------------------------------------------------------------
_cache: dict[tuple[EmbedderSpec, int | None], Embedder] = {}  # (spec, ONNX threads)
_cache_lock = threading.RLock()


def open_embedder(
    spec: EmbedderSpec | str | Embedder | None,
    store: StoreWithModel | None = None,
    purpose: str = "write",
) -> Embedder | None:
    """The embedder for ``spec`` on ``store`` (None: keyword-only), loaded once per process.

    ``spec``: an :class:`EmbedderSpec`, its config string, None (keyword-only), or an
    already built :class:`Embedder` (only checked against the store). ``store``: the
    memory store it reads and writes (None: no store, ``default`` is the packaged
    model). ``purpose``: one of :data:`PURPOSES`; it sets only ONNX Runtime's thread
    defaults (see top).
    Raises :class:`EmbedderError` for a bad spec or a model that cannot be loaded and
    :class:`ModelMismatch` for a model that is not the store's.
    """
    if purpose not in PURPOSES:
        raise EmbedderError(f"one of {', '.join(PURPOSES)}, got {purpose!r}", field="purpose")
    m = store.manifest() if store is not None else None
    where = f"store {store.root}" if store is not None else "the store"
    if isinstance(spec, Embedder):
        if m is not None and m.keyword_only:
            log.info("%s is keyword-only: the embedder is not used", where)
            return None
        check_model(spec, m.embedding_model if m else None, m.dim if m else None, where=where)
        return spec
    resolved = resolve_spec(spec, store)
    if resolved is None:
        return None
    spin = resolved.spin if resolved.spin is not None else purpose != "query"
    onnx_threads = resolved.threads
    if onnx_threads is None and purpose == "query" and not resolved.remote:
        onnx_threads = QUERY_ONNX_THREADS
    key = (replace(resolved, spin=None if resolved.remote else spin), onnx_threads)
    # The lock also stops two threads (Serve replicas, actors) loading one model twice;
    # re-entrant: a remote embedder's parity_with model is opened while it is held.
    with _cache_lock:
        embedder = _cache.get(key)
        if embedder is None:
            embedder = _cache[key] = _load(resolved, spin, onnx_threads)
            log.debug(
                "embedder %s for %s: %s (%s)",
                resolved,
                purpose,
                embedder.model_id,
                type(embedder).__name__,
            )
    if m is not None:
        check_model(embedder, m.embedding_model, m.dim, where=where)
    return embedder


def _load(spec: EmbedderSpec, spin: bool, onnx_threads: int | None) -> Embedder:
    if spec.remote:
        return _load_remote(spec)
    from mnemoray.embedders.onnx import OnnxEmbedder
    from mnemoray.embedders.torch import SentenceTransformerEmbedder

    model: str | Path | None = None if spec.packaged else spec.model
    runtime = spec.runtime
    tokens: dict[str, Any] = (
        {} if spec.max_batch_tokens is None else {"max_batch_tokens": spec.max_batch_tokens}
    )
    if runtime == "auto":
        if spec.device.startswith("cuda"):
            from mnemoray.embedders.cuda import CudaEmbedder

            # No fallback: a GPU asked for and missing is the caller's to know (one line).
            return CudaEmbedder(model, device=spec.device, dtype=spec.dtype, **tokens)
        if spec.packaged and spec.device == "cpu":
            try:
                return OnnxEmbedder(None, threads=onnx_threads, spin=spin, **tokens)
            except Exception as exc:  # noqa: BLE001 - any failure: the torch model, logged
                log.warning(
                    "mnemoray: the ONNX build of %s is unavailable (%s); embedding with torch",
                    PACKAGED_MODEL_ID,
                    exc,
                )
        runtime = "torch"
    if runtime == "onnx":
        return OnnxEmbedder(
            model, quantize=spec.quantize, threads=onnx_threads, spin=spin, **tokens
        )
    return SentenceTransformerEmbedder(model, device=spec.device, threads=spec.threads)


def _load_remote(spec: EmbedderSpec) -> Embedder:
    from mnemoray.embedders.openai_compat import OpenAIEmbedder

    reference = None
    if spec.parity_model is not None:
        try:
            reference = open_embedder(EmbedderSpec(model=spec.parity_model), None, "batch")
        except EmbedderError as exc:
            raise EmbedderError(
                f"cannot open the local model {spec.parity_with!r} to check parity against: {exc}",
                field="embedder.parity_with",
            ) from exc
    assert spec.model is not None and spec.url is not None  # EmbedderSpec checked both
    try:
        return OpenAIEmbedder(
            spec.url,
            spec.model,
            key_env=spec.key_env,
            batch=spec.batch,
            timeout=spec.timeout,
            retries=spec.retries,
            parity_with=reference,
        )
    except InvalidInput as exc:  # name the spec's option, as a parse error does
        raise exc.within("embedder") from None


__all__ = ["PURPOSES", "check_model", "open_embedder", "resolve_spec", "write_model"]
