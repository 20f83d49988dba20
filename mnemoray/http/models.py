"""The models one API server loads in its own process: the write embedder and summarizer
(when no ``Embedder`` / ``Summarizer`` deployment serves them) and the query embedder.

Used by :mod:`mnemoray.http.parts` (both the Serve replica and the local
backend) and by the Serve deployments, so that every in-process model is opened one way.
"""

from __future__ import annotations

from mnemoray.embedders import Embedder, EmbedderError, EmbedderSpec, check_model, open_embedder
from mnemoray.memory.store.protocol import MemoryBackend, open_backend
from mnemoray.settings.serve import ServeSettings
from mnemoray.summarizers import get_summarizer
from mnemoray.summarizers.base import Summarizer


def local_embedder(s: ServeSettings) -> Embedder | None:
    """The write embedder loaded in this process, as ``models.embedder`` names it (as the
    ``Embedder`` deployment opens it)."""
    return open_embedder(s.models.embedder, open_backend(s.store), "write")


def local_summarizer(s: ServeSettings) -> Summarizer:
    return get_summarizer(s.models.summarizer, **s.models.summarizer_options)


def query_spec(s: ServeSettings) -> EmbedderSpec:
    """The query embedder's spec: ``models.query_embedder`` ("auto": the write spec, same
    model and runtime) with ``models.query_threads`` when set."""
    auto = s.models.query_embedder.strip().lower() == "auto"
    return EmbedderSpec.parse(
        s.models.embedder if auto else s.models.query_embedder,
        field="models.embedder" if auto else "models.query_embedder",
    ).override(threads=s.models.query_threads)


def open_query_embedder(
    s: ServeSettings,
    store: MemoryBackend,
    write_embedder: Embedder | None,
    *,
    share_write: bool = False,
) -> Embedder | None:
    """The in-process query embedder, checked to be the write embedder's model: a store
    searched with another model's vectors would answer nonsense.

    ``share_write``: ``write_embedder`` was opened in this process from
    ``models.embedder`` (:func:`local_embedder`; the local backend), so a query spec
    equal to it is answered by that very instance instead of a second copy of the model.
    A Serve replica keeps its own query embedder: its writes may be embedded by the
    ``Embedder`` deployment, and its query encoder is tuned apart (no spin-wait, its
    own threads).
    """
    spec = query_spec(s)
    w = write_embedder
    # The same spec differs here only in ONNX Runtime's spin default (off for queries):
    # in one process the write encoder's threads spin on the same cores anyway, and the
    # local backend encodes its one user's queries one at a time on its encode thread,
    # so a second session would buy nothing but a second model in memory. A query spec
    # that differs (query_threads set, another runtime or option) gets its own instance:
    # an ONNX session's intra-op threads are its own, so another thread count needs
    # another session (torch's count is process-wide, whichever instance sets it).
    if share_write and w is not None and spec == EmbedderSpec.parse(s.models.embedder):
        return w
    q = open_embedder(spec, store, "query")
    if (q is None) != (w is None):
        raise EmbedderError(
            f"writes would embed with {getattr(w, 'model_id', None)!r} "
            f"and queries with {getattr(q, 'model_id', None)!r}; they "
            f"must be one model",
            field="models.query_embedder",
        )
    if q is not None and w is not None:
        check_model(q, w.model_id, w.dim, where="the write embedder")
    return q


__all__ = ["local_embedder", "local_summarizer", "open_query_embedder", "query_spec"]
