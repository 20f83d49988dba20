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
  to torch with a logged warning when that build cannot be had; other models and
  other devices run with torch. ``torch`` or ``onnx`` in the spec forces one.
- the store-vs-embedder check: :func:`check_model`, used by every caller; what a
  write declares: :func:`write_model`.
- models are loaded once per process and shared (:func:`open_embedder` caches them).

The purpose ("write", "query", "batch") never changes the model or the runtime; it
only sets the default of ``spin``: a query encoder shares its cores with a server,
so its idle ONNX Runtime threads do not spin-wait.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemoray.embedders.base import PACKAGED_MODEL_ID, Embedder, EmbedderError, ModelMismatch
from mnemoray.memory.manifest import KEYWORD_ONLY_MODEL

if TYPE_CHECKING:
    from mnemoray.memory.store import MemoryStore

log = logging.getLogger(__name__)

DEFAULT_MODEL = "default"
RUNTIMES = ("auto", "torch", "onnx")
PURPOSES = ("write", "query", "batch")
_KEYWORD_ONLY = frozenset({"none", "keyword"})
# A bare first word that names the packaged model and, for some, a runtime.
_SHORTHANDS: dict[str, dict[str, Any]] = {
    "default": {}, "minilm": {},
    "torch": {"runtime": "torch"},
    "onnx": {"runtime": "onnx"},
    "onnx-int8": {"runtime": "onnx", "quantize": True},
}
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class EmbedderSpec:
    """What embedder to open, independent of any store.

    ``model``: ``"default"``, a local folder or hub model name, or None (keyword-only).
    ``runtime``: ``auto`` | ``torch`` | ``onnx``. ``device``: torch device (``cpu``,
    ``cuda``, ``cuda:1``; ONNX runs on CPU only). ``threads``: intra-op threads (None:
    the runtime's own; torch's setting is process-wide). ``spin``: ONNX Runtime threads
    spin-wait between runs (None: off for queries, on otherwise). ``quantize``: the
    dynamic int8 ONNX build, which must pass the same parity gate.

    As a config string: the model (or a shorthand) first, then ``key=value`` options,
    comma-separated: ``default``, ``none``, ``torch``, ``onnx``, ``onnx-int8``,
    ``./models/e5,threads=2``, ``default,runtime=torch,device=cuda``.
    """

    model: str | None = DEFAULT_MODEL
    runtime: str = "auto"
    device: str = "cpu"
    threads: int | None = None
    spin: bool | None = None
    quantize: bool = False

    def __post_init__(self) -> None:
        if self.model is not None and (not isinstance(self.model, str)
                                       or not self.model.strip()):
            raise EmbedderError(f"must be a model name, a path or None, got {self.model!r}",
                                field="model")
        if self.runtime not in RUNTIMES:
            raise EmbedderError(f"one of {', '.join(RUNTIMES)}, got {self.runtime!r}",
                                field="runtime")
        if not isinstance(self.device, str) or not self.device.strip():
            raise EmbedderError(f"must be a device name such as 'cpu' or 'cuda', "
                                f"got {self.device!r}", field="device")
        if self.threads is not None and (isinstance(self.threads, bool)
                                         or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise EmbedderError(f"must be a positive integer, got {self.threads!r}",
                                field="threads")
        for name in ("spin", "quantize"):
            value = getattr(self, name)
            if not (isinstance(value, bool) or (name == "spin" and value is None)):
                raise EmbedderError(f"must be true or false, got {value!r}", field=name)
        if self.quantize and self.runtime != "onnx":
            raise EmbedderError("int8 weights exist only for runtime=onnx", field="quantize")
        if self.runtime == "onnx" and self.device != "cpu":
            raise EmbedderError(f"the ONNX runtime runs on cpu only, got {self.device!r}",
                                field="device")

    @property
    def keyword_only(self) -> bool:
        return self.model is None

    @property
    def packaged(self) -> bool:
        """Names the all-MiniLM-L6-v2 weights shipped with mnemoray."""
        return self.model in (DEFAULT_MODEL, PACKAGED_MODEL_ID)

    @classmethod
    def parse(cls, value: str | EmbedderSpec | None, *, field: str = "embedder") -> EmbedderSpec:
        """The spec named by a config string (see the class); None is keyword-only.

        Errors are :class:`EmbedderError` (an ``InvalidInput``) naming ``field`` and
        the option, e.g. ``embedder.threads: must be a positive integer, got 'x'``.
        """
        if isinstance(value, EmbedderSpec):
            return value
        if value is None:
            return cls(model=None)
        if not isinstance(value, str):
            raise EmbedderError(f"expected a spec string, got {type(value).__name__}",
                                field=field)
        text = value.strip()
        if not text:
            raise EmbedderError("must not be empty (use 'none' for keyword-only)", field=field)
        # An existing folder may hold commas; then options need "=" to be told apart.
        whole = "," not in text or ("=" not in text and Path(text).expanduser().exists())
        parts = [text] if whole else [p.strip() for p in text.split(",")]
        options: dict[str, Any] = {}
        if "=" not in parts[0]:
            word = parts.pop(0)
            if word.lower() in _SHORTHANDS:
                options.update(_SHORTHANDS[word.lower()])
            options["model"] = _model_word(word)
        given: set[str] = set()
        known = {f.name for f in fields(cls)}
        for part in parts:
            key, sep, raw = part.partition("=")
            key, raw = key.strip().lower(), raw.strip()
            if not sep or not key:
                raise EmbedderError(f"expected key=value, got {part!r}", field=field)
            if key not in known:
                raise EmbedderError(f"unknown option; known: {', '.join(sorted(known))}",
                                    field=f"{field}.{key}")
            if key in given:
                raise EmbedderError("given twice", field=f"{field}.{key}")
            given.add(key)
            options[key] = _option(key, raw, f"{field}.{key}")
        try:
            return cls(**options)
        except EmbedderError as exc:
            raise exc.within(field) from None

    def override(self, **changes: Any) -> EmbedderSpec:
        """This spec with the options that are not None replaced (flags left unset keep
        the spec's value)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def __str__(self) -> str:
        head = "none" if self.model is None else self.model
        opts = [f"{f.name}={_text(getattr(self, f.name))}" for f in fields(self)
                if f.name != "model" and getattr(self, f.name) != f.default]
        return ",".join([head, *opts])


def _model_word(word: str) -> str | None:
    low = word.lower()
    if low in _KEYWORD_ONLY:
        return None
    if low in _SHORTHANDS:
        return DEFAULT_MODEL
    return word


def _option(key: str, raw: str, field: str) -> Any:
    if key == "model":
        if not raw:
            raise EmbedderError("must not be empty", field=field)
        return _model_word(raw)
    if key == "threads":
        try:
            return None if raw.lower() in ("", "auto", "none") else int(raw)
        except ValueError:
            raise EmbedderError(f"must be a positive integer, got {raw!r}", field=field) \
                from None
    if key in ("spin", "quantize"):
        low = raw.lower()
        if key == "spin" and low in ("", "auto", "none"):
            return None
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise EmbedderError(f"must be true or false, got {raw!r}", field=field)
    return raw.lower() if key == "runtime" else raw


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# -- the store's side -------------------------------------------------------------------
def check_model(embedder: Embedder | tuple[str, int] | None, model: str | None,
                dim: int | None, *, where: str = "the store") -> None:
    """Raise :class:`ModelMismatch` unless ``embedder`` makes the vectors of ``model``/``dim``.

    The one store-vs-embedder check. ``embedder`` may also be the ``(model_id, dim)``
    of a vector made elsewhere; None embeds nothing. ``model`` None (nothing written
    yet) or keyword-only accepts any embedder.
    """
    if embedder is None or model is None or model == KEYWORD_ONLY_MODEL:
        return
    got = embedder if isinstance(embedder, tuple) else (embedder.model_id, embedder.dim)
    if (model, dim) != tuple(got):
        raise ModelMismatch(f"{where} embeds with {model!r} (dim {dim}), got {got[0]!r} "
                            f"(dim {got[1]})", field="embedder")


def write_model(store: MemoryStore, embedder: Embedder | None) -> tuple[str, int]:
    """(embedding_model, dim) that a write to ``store`` with ``embedder`` declares."""
    m = store.manifest()
    if embedder is None:
        if m.embedding_model is not None and not m.keyword_only:
            raise ModelMismatch(f"store {store.root} embeds with {m.embedding_model!r}; open "
                                f"the memory service with that embedder to write to it",
                                field="embedder")
        return KEYWORD_ONLY_MODEL, 0
    check_model(embedder, m.embedding_model, m.dim, where=f"store {store.root}")
    return embedder.model_id, embedder.dim


def resolve_spec(spec: EmbedderSpec | str | None,
                 store: MemoryStore | None = None) -> EmbedderSpec | None:
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
    stored = m.embedding_model
    if spec.model == DEFAULT_MODEL:
        return spec if stored == PACKAGED_MODEL_ID else replace(spec, model=stored)
    if spec.model != stored:
        raise ModelMismatch(f"store {store.root} embeds with {stored!r}, not {spec.model!r} "
                            f"(use 'default' for the store's own model)", field="embedder")
    return spec


# -- opening ----------------------------------------------------------------------------
_cache: dict[tuple, Embedder] = {}
_cache_lock = threading.Lock()


def open_embedder(spec: EmbedderSpec | str | Embedder | None,
                  store: MemoryStore | None = None, purpose: str = "write") -> Embedder | None:
    """The embedder for ``spec`` on ``store`` (None: keyword-only), loaded once per process.

    ``spec``: an :class:`EmbedderSpec`, its config string, None (keyword-only), or an
    already built :class:`Embedder` (only checked against the store). ``store``: the
    memory store it reads and writes (None: no store, ``default`` is the packaged
    model). ``purpose``: one of :data:`PURPOSES`; it sets only the ``spin`` default.
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
    key = (resolved.model, resolved.runtime, resolved.device, resolved.threads,
           resolved.quantize, spin)
    # The lock also stops two threads (Serve replicas, actors) loading one model twice.
    with _cache_lock:
        embedder = _cache.get(key)
        if embedder is None:
            embedder = _cache[key] = _load(resolved, spin)
            log.debug("embedder %s for %s: %s (%s)", resolved, purpose, embedder.model_id,
                      type(embedder).__name__)
    if m is not None:
        check_model(embedder, m.embedding_model, m.dim, where=where)
    return embedder


def _load(spec: EmbedderSpec, spin: bool) -> Embedder:
    from mnemoray.embedders.onnx import OnnxEmbedder
    from mnemoray.embedders.torch import SentenceTransformerEmbedder

    model: str | Path | None = None if spec.packaged else spec.model
    runtime = spec.runtime
    if runtime == "auto":
        if spec.packaged and spec.device == "cpu":
            try:
                return OnnxEmbedder(None, threads=spec.threads, spin=spin)
            except Exception as exc:  # noqa: BLE001 - any failure: the torch model, logged
                log.warning("mnemoray: the ONNX build of %s is unavailable (%s); embedding "
                            "with torch", PACKAGED_MODEL_ID, exc)
        runtime = "torch"
    if runtime == "onnx":
        return OnnxEmbedder(model, quantize=spec.quantize, threads=spec.threads, spin=spin)
    return SentenceTransformerEmbedder(model, device=spec.device, threads=spec.threads)


__all__ = ["DEFAULT_MODEL", "PURPOSES", "RUNTIMES", "EmbedderSpec", "check_model",
           "open_embedder", "resolve_spec", "write_model"]
