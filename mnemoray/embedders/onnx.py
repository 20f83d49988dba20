"""The ONNX Runtime build of a sentence-transformers model: export, parity gate, encode.

The transformer, mean pooling and L2 normalisation are exported once per model to a
shared cache; the build may carry the torch model's ``model_id`` (and so write to
or read a store built with torch) only after it passes the parity gate against it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from mnemoray.embedders.base import Embedder, EmbedderError
from mnemoray.embedders.st_folder import StLayout, read_json, resolve_st_folder
from mnemoray.files import file_lock

# Bump when the exported graph, the tokenisation or the quantisation recipe changes:
# it is part of the cache key, so old exports are never reused for new code.
ONNX_EXPORT_VERSION = 1
ONNX_OPSET = 17
# The gate an ONNX variant must pass against the torch model before it may carry the
# torch model's model_id (the store mixes vectors only under one id).
PARITY_MIN_COSINE = 0.999
_PARITY_BATCH_SIZES = (1, 16)  # batch 1: no padding; 16: mixed lengths, padded

# Built-in verification set: short queries, long paragraphs (> 256 tokens, so they are
# truncated), unicode and near-empty strings, in an order that mixes lengths in a batch.
_LONG_WORDS = (
    "memory",
    "agent",
    "session",
    "user",
    "preference",
    "travel",
    "window",
    "seat",
    "invoice",
    "refund",
    "cluster",
    "replica",
    "latency",
    "budget",
    "parrot",
    "apartment",
    "lease",
    "doctor",
    "appointment",
    "quarterly",
    "report",
)
PARITY_TEXTS: tuple[str, ...] = (
    "hello",
    "?",
    "",
    "   ",
    "where does the user like to sit on flights",
    " ".join(_LONG_WORDS[i % len(_LONG_WORDS)] for i in range(320)),
    "African Grey parrot",
    "Ünïcödé façade — naïve café, Straße, Ærø, Ωmega!",
    "日本語のテキストと中文文本以及한국어 문장",
    "emoji 🦜🏠✈️ and arabic مرحبا بالعالم and hebrew שלום",
    "What did I tell you about my sister's wedding in June?",
    (
        "The assistant summarised the meeting: the team agreed to move the deployment of the "
        "recall service to the new cluster next week, after the load tests pass. "
    )
    * 12,
    "def recall(query: str, k: int = 5) -> list[Memory]: return store.search(query, k)",
    "1234567890 3.14159 2024-06-01T12:00:00Z #42 @bob $19.99",
    "A" * 600,
    "!!!???...,,,;;;",
    "apartment lease renewal deadline",
    "Tell me everything you remember about the customer's refund request and the "
    "escalation path that support used last quarter, including dates.",
    "ok",
    "\t\nnewlines\nand\ttabs\n",
)


def default_onnx_cache_dir() -> Path:
    """``$MNEMORAY_ONNX_CACHE``, else ``$XDG_CACHE_HOME/mnemoray/onnx`` (~/.cache/...)."""
    explicit = os.environ.get("MNEMORAY_ONNX_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "mnemoray" / "onnx"


def verify_parity(
    candidate: Embedder,
    reference: Embedder,
    texts: Sequence[str],
    *,
    batch_sizes: Sequence[int | None] = _PARITY_BATCH_SIZES,
) -> float:
    """Minimum cosine between the two embedders' vectors for the same texts.

    The candidate is run at every batch size in ``batch_sizes`` (batch 1 has no
    padding, larger batches mix lengths and pad), the reference once; the result is
    the minimum over all of them. Both embedders return unit rows, so the row-wise
    dot product is the cosine.
    """
    items = list(texts)
    if not items:
        raise EmbedderError("must not be empty", field="texts")
    if candidate.dim != reference.dim:
        raise EmbedderError(
            f"dimensions differ: {candidate.dim} vs {reference.dim}", field="reference"
        )
    ref = reference.encode(items, batch_size=32).astype(np.float64)
    worst = 1.0
    for batch_size in batch_sizes:
        got = candidate.encode(items, batch_size=batch_size).astype(np.float64)
        worst = min(worst, float(np.min(np.einsum("ij,ij->i", got, ref))))
    return worst


def _atomic_write(dest: Path, data: bytes) -> None:
    # Temp file in the same folder + rename: a reader sees the old file or the whole new
    # one, and two processes exporting at once each rename a complete file.
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a shared cache from other users
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "missing"


_hash_memo: dict[tuple, str] = {}


def _hash_files(files: Sequence[Path], extra: str) -> str:
    key = (extra, *((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files))
    if key not in _hash_memo:
        digest = hashlib.sha256(extra.encode())
        for f in files:
            digest.update(f"\0{f.name}\0{f.stat().st_size}\0".encode())
            with open(f, "rb") as fh:
                for chunk in iter(functools.partial(fh.read, 1 << 20), b""):
                    digest.update(chunk)
        _hash_memo[key] = digest.hexdigest()[:24]
    return _hash_memo[key]


# Padded tokens per ONNX Runtime run. Cost grows with rows x longest text, so a run of
# mixed lengths pays for padding; a token cap keeps runs of long texts short while short
# texts still go 64 rows at a time (the sweep behind the value: benchmarks/README.md).
MAX_BATCH_TOKENS = 1024


def token_batches(
    order: np.ndarray, lengths: np.ndarray, max_rows: int, max_tokens: int
) -> Iterator[np.ndarray]:
    """Runs of ``order`` (longest first) of at most ``max_rows`` rows and, past the
    first row, at most ``max_tokens`` padded tokens (rows x the run's longest)."""
    start, n = 0, len(order)
    while start < n:
        width = max(1, int(lengths[order[start]]))
        rows = max(1, min(max_rows, max_tokens // width))
        yield order[start : start + rows]
        start += rows


class OnnxEmbedder(Embedder):
    """The same sentence-transformers model run by ONNX Runtime on CPU.

    The transformer, mean pooling and L2 normalisation are exported once (legacy
    TorchScript exporter, opset 17, dynamic batch and sequence axes, eager attention)
    to ``cache_dir/<model-hash>/model.onnx`` and optionally quantised to dynamic int8
    (``model.int8.onnx``). Tokenisation uses the model's fast tokenizer directly, with
    the model's ``max_seq_length`` (256 for all-MiniLM-L6-v2) and padding to the
    longest text in each batch (texts are length-sorted first, as sentence-transformers
    does).

    With ``verify=True`` (the default) the variant must match the torch model: its
    minimum cosine over :data:`PARITY_TEXTS` (batch sizes 1 and 16) must be at least
    :data:`PARITY_MIN_COSINE`, or the constructor raises :class:`EmbedderError`. The
    measured value is cached next to the export (keyed by the text set and the
    onnxruntime / torch / sentence-transformers versions), so a restart does not load
    torch. Only a verified embedder carries the torch embedder's ``model_id``; with
    ``verify=False`` and no passing record it is ``<id>+onnx[-int8]-unverified``, which
    a store built with the torch model will not accept.

    ``spin=False`` stops ONNX Runtime's intra-op threads from spin-waiting after each
    run: slightly slower alone, but a server sharing a few cores with its HTTP proxy
    and other replicas (the Serve ingress) should not burn them between queries.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        quantize: bool = False,
        threads: int | None = None,
        cache_dir: str | Path | None = None,
        *,
        verify: bool = True,
        reference: Embedder | None = None,
        spin: bool = True,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
    ) -> None:
        if threads is not None and threads < 1:
            raise EmbedderError(f"must be >= 1, got {threads}", field="threads")
        if max_batch_tokens < 1:
            raise EmbedderError(f"must be >= 1, got {max_batch_tokens}", field="max_batch_tokens")
        self.max_batch_tokens = max_batch_tokens
        root, base_id = resolve_st_folder(model)
        layout = StLayout(root)
        self.quantize = bool(quantize)
        self.variant = "int8" if self.quantize else "fp32"
        self.threads = threads
        self.spin = bool(spin)
        self.max_seq_length = layout.max_seq_length
        self._lower = layout.do_lower_case

        cache_root = (
            Path(cache_dir).expanduser() if cache_dir is not None else default_onnx_cache_dir()
        )
        model_hash = _hash_files(
            layout.files,
            f"mnemoray-onnx-v{ONNX_EXPORT_VERSION}-opset{ONNX_OPSET}-len{layout.max_seq_length}",
        )
        self.cache_path = cache_root / model_hash
        self.fp32_path = self.cache_path / "model.onnx"
        self.onnx_path = self.cache_path / ("model.int8.onnx" if self.quantize else "model.onnx")
        self._parity_path = self.cache_path / f"parity-{self.variant}.json"
        try:
            self.cache_path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EmbedderError(
                f"cannot create {self.cache_path}: {exc}", field="cache_dir"
            ) from exc

        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(layout.tokenizer_file))
        # Its own settings (all-MiniLM's file says: truncate at 128, pad to 128) are not
        # sentence-transformers': truncate at max_seq_length, pad per batch (in _encode).
        self._pad_id = int((self._tokenizer.padding or {}).get("pad_id") or 0)
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=layout.max_seq_length)

        if not self.onnx_path.is_file():
            with file_lock(self.cache_path / ".lock"):
                if not self.fp32_path.is_file():  # another process may have done it
                    _export_onnx(layout, self._tokenizer, self._pad_id, self.fp32_path)
                if self.quantize and not self.onnx_path.is_file():
                    _quantize_int8(self.fp32_path, self.onnx_path)
        self._session = self._make_session()
        self._input_names = [i.name for i in self._session.get_inputs()]
        self.dim = int(self._session.get_outputs()[0].shape[1])

        self.parity_min_cosine: float | None = self._cached_parity()
        if self.parity_min_cosine is None and verify:
            with file_lock(self.cache_path / ".lock"):
                self.parity_min_cosine = self._cached_parity()
                if self.parity_min_cosine is None:
                    if reference is None:
                        from mnemoray.embedders.torch import SentenceTransformerEmbedder

                        reference = SentenceTransformerEmbedder(model)
                    elif reference.model_id != base_id:
                        raise EmbedderError(
                            f"model {reference.model_id!r} is not {base_id!r}", field="reference"
                        )
                    self.parity_min_cosine = verify_parity(
                        self, reference, PARITY_TEXTS, batch_sizes=_PARITY_BATCH_SIZES
                    )
                    record = {**self._parity_key(), "min_cosine": self.parity_min_cosine}
                    _atomic_write(self._parity_path, json.dumps(record, indent=1).encode())
        self.verified = (
            self.parity_min_cosine is not None and self.parity_min_cosine >= PARITY_MIN_COSINE
        )
        if verify and not self.verified:
            raise EmbedderError(
                f"onnx {self.variant} embedder for {base_id!r} failed the parity check: "
                f"minimum cosine vs the torch model {self.parity_min_cosine:.5f} < "
                f"{PARITY_MIN_COSINE} (record: {self._parity_path}); it would change "
                f"search results, so it is refused. Use the fp32 ONNX or torch embedder."
            )
        self.model_id = (
            base_id
            if self.verified
            else f"{base_id}+onnx{'-int8' if self.quantize else ''}-unverified"
        )

    def _make_session(self):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads or 0  # 0: onnxruntime's default
        options.inter_op_num_threads = 1
        if not self.spin:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            return ort.InferenceSession(
                str(self.onnx_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise EmbedderError(
                f"cannot load {self.onnx_path} (delete the folder to re-export): {exc}",
                field="model",
            ) from exc

    def _parity_key(self) -> dict:
        texts_hash = hashlib.sha256("\0".join(PARITY_TEXTS).encode()).hexdigest()[:16]
        return {
            "variant": self.variant,
            "export_version": ONNX_EXPORT_VERSION,
            "texts_sha256": texts_hash,
            "batch_sizes": list(_PARITY_BATCH_SIZES),
            "versions": {
                d: _version(d)
                for d in (
                    "onnxruntime",
                    "tokenizers",
                    "torch",
                    "transformers",
                    "sentence-transformers",
                )
            },
        }

    def _cached_parity(self) -> float | None:
        record = read_json(self._parity_path)
        if not record or not isinstance(record.get("min_cosine"), (int, float)):
            return None
        if {k: record.get(k) for k in self._parity_key()} != self._parity_key():
            return None  # other versions or texts: measure again
        return float(record["min_cosine"])

    def _encode(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        assert batch_size is not None  # not own_batching: encode always passes one
        if self._lower:
            texts = [t.lower() for t in texts]
        encodings = self._tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        # Longest first, like sentence-transformers: batches of similar length pad less.
        order = np.argsort(-lengths, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        want_types = "token_type_ids" in self._input_names
        for rows in token_batches(order, lengths, batch_size, self.max_batch_tokens):
            width = int(lengths[rows].max())
            ids = np.full((len(rows), width), self._pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64) if want_types else None
            for r, i in enumerate(rows):
                enc, n = encodings[i], int(lengths[i])
                ids[r, :n] = enc.ids
                mask[r, :n] = 1
                if types is not None:
                    types[r, :n] = enc.type_ids
            feed = {"input_ids": ids, "attention_mask": mask}
            if types is not None:
                feed["token_type_ids"] = types
            out[rows] = self._session.run(None, feed)[0]
        return out


def _export_onnx(layout: StLayout, tokenizer, pad_id: int, dest: Path) -> None:
    """Transformer + mean pooling + L2 normalisation -> one ONNX graph at ``dest``.

    The legacy TorchScript exporter (``dynamo=False``; the dynamo exporter needs
    ``onnxscript``, not a dependency), opset 17, dynamic batch and sequence axes, the
    wrapper in eval mode. Attention is loaded as "eager" (a plain additive mask, the
    most portable graph). Beware: ``torch.onnx.export`` puts the module back in the mode
    it found it in, so exporting a freshly built wrapper (train mode by default) would
    switch the wrapped model's dropout on for any later comparison.
    """
    import io
    import warnings

    import torch
    from transformers import AutoModel

    try:
        hf = AutoModel.from_pretrained(
            str(layout.transformer_dir), attn_implementation="eager", local_files_only=True
        )
    except Exception as exc:
        raise EmbedderError(
            f"could not load {layout.transformer_dir} for ONNX export: {exc}", field="model"
        ) from exc
    uses_types = "token_type_ids" in inspect.signature(hf.forward).parameters

    class MeanPoolNormalize(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kwargs = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
            hidden = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, **kwargs
            ).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    wrapper = MeanPoolNormalize(hf).eval()
    # Two lengths, so the example batch is padded and the mask path is traced for real.
    tokenizer_copy = type(tokenizer).from_str(tokenizer.to_str())
    tokenizer_copy.enable_padding(pad_id=pad_id)
    example = tokenizer_copy.encode_batch(
        ["a short text", "a somewhat longer example text to make the batch need padding"]
    )
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if uses_types else [])
    fields = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
    args = tuple(
        torch.tensor([getattr(e, fields[n]) for e in example], dtype=torch.long) for n in names
    )
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["sentence_embedding"] = {0: "batch"}
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and deprecation warnings
        torch.onnx.export(
            wrapper,
            args,
            buffer,  # type: ignore[arg-type]  # a file object works; torch's stub says paths
            input_names=names,
            output_names=["sentence_embedding"],
            dynamic_axes=axes,
            opset_version=ONNX_OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    _atomic_write(dest, buffer.getvalue())


def _quantize_int8(source: Path, dest: Path) -> None:
    """Dynamic int8 weights for the MatMuls, per channel. Whether the result may be
    used is for the parity gate to say (see benchmarks/README.md for how it scores)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp.onnx")
    os.close(fd)
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # "consider pre-processing" advice on the root logger
    try:
        quantize_dynamic(
            str(source),
            tmp,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
        )
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        logging.disable(previous)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
