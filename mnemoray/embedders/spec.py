"""EmbedderSpec: what embedder to open, as a dataclass and as a config string.

Parsing only: nothing is loaded here (see :mod:`mnemoray.embedders.resolve`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mnemoray.embedders.base import PACKAGED_MODEL_ID, EmbedderError

DEFAULT_MODEL = "default"
REMOTE_RUNTIME = "openai"
RUNTIMES = ("auto", "torch", "onnx", REMOTE_RUNTIME)
# The model_id of a remote model that was not parity-checked against a local one.
REMOTE_ID_PREFIX = "openai:"
_KEYWORD_ONLY = frozenset({"none", "keyword"})
# A bare first word that names the packaged model and, for some, a runtime.
_SHORTHANDS: dict[str, dict[str, Any]] = {
    "default": {},
    "minilm": {},
    "torch": {"runtime": "torch"},
    "onnx": {"runtime": "onnx"},
    "onnx-int8": {"runtime": "onnx", "quantize": True},
    REMOTE_RUNTIME: {"runtime": REMOTE_RUNTIME},
}
# Options of the remote runtime only (an OpenAI-compatible /v1/embeddings server).
REMOTE_OPTIONS = ("url", "key_env", "batch", "timeout", "retries", "parity_with")
# Precision of the GPU embedder (runtime=auto on cuda): auto takes the first half
# precision that passes the parity gate, else float32.
DTYPES = ("auto", "float32", "float16", "bfloat16")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class EmbedderSpec:
    """What embedder to open, independent of any store.

    ``model``: ``"default"``, a local folder or hub model name, or None (keyword-only).
    ``runtime``: ``auto`` | ``torch`` | ``onnx`` | ``openai``. ``device``: torch device
    (``cpu``, ``cuda``, ``cuda:1``; ONNX runs on CPU only). ``threads``: intra-op threads
    (None: the runtime's own; torch's setting is process-wide). ``spin``: ONNX Runtime
    threads spin-wait between runs (None: off for queries, on otherwise). ``quantize``:
    the dynamic int8 ONNX build, which must pass the same parity gate.

    ``runtime=openai`` embeds on an OpenAI-compatible server (vLLM, TEI, Ollama):
    ``model`` is the name the server serves; ``url`` its base URL (``/v1/embeddings``
    is appended); ``key_env`` the *name* of the environment variable holding its API
    key (the key itself never appears in a spec); ``batch`` the most texts per request;
    ``timeout`` seconds per request; ``retries`` on 429/5xx/connection errors;
    ``parity_with`` a local model (``default``, a folder, a hub name) the server must
    match on the parity probe set before it may carry that model's ``model_id``.

    On a CUDA device, ``runtime=auto`` runs the packed GPU embedder
    (:class:`~mnemoray.embedders.cuda.CudaEmbedder`): ``dtype`` (``auto``, ``float32``,
    ``float16``, ``bfloat16``; half precision only through the parity gate) and
    ``max_batch_tokens`` (padded tokens per forward pass; also the ONNX runtime's cap).
    ``runtime=torch`` keeps plain sentence-transformers on any device.

    As a config string: the model (or a shorthand) first, then ``key=value`` options,
    comma-separated: ``default``, ``none``, ``torch``, ``onnx``, ``onnx-int8``,
    ``./models/e5,threads=2``, ``default,device=cuda,dtype=float16``,
    ``default,runtime=torch,device=cuda``,
    ``openai,url=http://host:8000,model=BAAI/bge-small-en-v1.5,key_env=EMB_KEY``.
    """

    model: str | None = DEFAULT_MODEL
    runtime: str = "auto"
    device: str = "cpu"
    threads: int | None = None
    spin: bool | None = None
    quantize: bool = False
    url: str | None = None
    key_env: str | None = None
    batch: int | None = None
    timeout: float | None = None
    retries: int | None = None
    parity_with: str | None = None
    dtype: str = "auto"
    max_batch_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise EmbedderError(
                f"must be a model name, a path or None, got {self.model!r}", field="model"
            )
        if self.runtime not in RUNTIMES:
            raise EmbedderError(
                f"one of {', '.join(RUNTIMES)}, got {self.runtime!r}", field="runtime"
            )
        if not isinstance(self.device, str) or not self.device.strip():
            raise EmbedderError(
                f"must be a device name such as 'cpu' or 'cuda', got {self.device!r}",
                field="device",
            )
        if self.threads is not None and not _positive_int(self.threads):
            raise EmbedderError(
                f"must be a positive integer, got {self.threads!r}", field="threads"
            )
        for name in ("spin", "quantize"):
            value = getattr(self, name)
            if not (isinstance(value, bool) or (name == "spin" and value is None)):
                raise EmbedderError(f"must be true or false, got {value!r}", field=name)
        if self.quantize and self.runtime != "onnx":
            raise EmbedderError("int8 weights exist only for runtime=onnx", field="quantize")
        if self.runtime == "onnx" and self.device != "cpu":
            raise EmbedderError(
                f"the ONNX runtime runs on cpu only, got {self.device!r}", field="device"
            )
        self._check_batching()
        if self.remote:
            self._check_remote()
        else:
            for name in REMOTE_OPTIONS:
                if getattr(self, name) is not None:
                    raise EmbedderError(
                        f"only for runtime={REMOTE_RUNTIME} (an OpenAI-compatible server)",
                        field=name,
                    )

    def _check_batching(self) -> None:
        if self.dtype not in DTYPES:
            raise EmbedderError(f"one of {', '.join(DTYPES)}, got {self.dtype!r}", field="dtype")
        gpu = self.runtime == "auto" and self.device.startswith("cuda")
        if self.dtype != "auto" and not gpu:
            raise EmbedderError(
                f"only for the GPU embedder (runtime=auto on a cuda device), "
                f"got runtime={self.runtime} device={self.device}",
                field="dtype",
            )
        if self.max_batch_tokens is not None:
            if not _positive_int(self.max_batch_tokens):
                raise EmbedderError(
                    f"must be a positive integer, got {self.max_batch_tokens!r}",
                    field="max_batch_tokens",
                )
            if not (
                gpu
                or self.runtime == "onnx"
                or (self.runtime == "auto" and self.packaged and self.device == "cpu")
            ):
                raise EmbedderError(
                    "only for runtimes that pack batches by tokens (onnx, "
                    "or runtime=auto on a cuda device)",
                    field="max_batch_tokens",
                )

    def _check_remote(self) -> None:
        if self.model in (None, DEFAULT_MODEL):
            raise EmbedderError(
                f"runtime={REMOTE_RUNTIME} needs the name of the model the "
                f"server serves (model=...)",
                field="model",
            )
        if self.url is None:
            raise EmbedderError(
                f"runtime={REMOTE_RUNTIME} needs the server's base URL, e.g. url=http://host:8000",
                field="url",
            )
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise EmbedderError(f"expected http(s)://host[:port], got {self.url!r}", field="url")
        if self.key_env is not None and (
            not isinstance(self.key_env, str) or not _ENV_NAME.fullmatch(self.key_env)
        ):
            # Not echoed: a key pasted here by mistake must not reach a log.
            raise EmbedderError(
                "must be the NAME of an environment variable that holds "
                "the API key (letters, digits, _), not the key",
                field="key_env",
            )
        if self.batch is not None and not _positive_int(self.batch):
            raise EmbedderError(f"must be a positive integer, got {self.batch!r}", field="batch")
        if self.retries is not None and (
            isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0
        ):
            raise EmbedderError(f"must be an integer >= 0, got {self.retries!r}", field="retries")
        if self.timeout is not None and (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, (int, float))
            or not 0 < self.timeout < float("inf")
        ):
            raise EmbedderError(
                f"must be a positive number of seconds, got {self.timeout!r}", field="timeout"
            )
        if self.parity_with is not None and (
            not isinstance(self.parity_with, str) or _model_word(self.parity_with) is None
        ):
            raise EmbedderError(
                f"must name a local model (default, a folder or a hub "
                f"name), got {self.parity_with!r}",
                field="parity_with",
            )
        for name, value in (
            ("device", self.device != "cpu"),
            ("threads", self.threads),
            ("spin", self.spin is not None),
        ):
            if value:
                raise EmbedderError(
                    f"not used by runtime={REMOTE_RUNTIME} (the server runs the model)", field=name
                )

    @property
    def keyword_only(self) -> bool:
        return self.model is None

    @property
    def remote(self) -> bool:
        """Embeds on an OpenAI-compatible server, not in this process."""
        return self.runtime == REMOTE_RUNTIME

    @property
    def packaged(self) -> bool:
        """Names the all-MiniLM-L6-v2 weights shipped with mnemoray (run locally)."""
        return not self.remote and self.model in (DEFAULT_MODEL, PACKAGED_MODEL_ID)

    @property
    def parity_model(self) -> str | None:
        """The local model ``parity_with`` names (``default`` for the packaged one)."""
        return None if self.parity_with is None else _model_word(self.parity_with)

    @property
    def remote_model_id(self) -> str:
        """The ``model_id`` a remote spec's vectors carry without a parity check."""
        return f"{REMOTE_ID_PREFIX}{self.model}"

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
            raise EmbedderError(f"expected a spec string, got {type(value).__name__}", field=field)
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
                raise EmbedderError(
                    f"unknown option; known: {', '.join(sorted(known))}", field=f"{field}.{key}"
                )
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
        opts = [
            f"{f.name}={_text(getattr(self, f.name))}"
            for f in fields(self)
            if f.name != "model" and getattr(self, f.name) != f.default
        ]
        return ",".join([head, *opts])


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _model_word(word: str) -> str | None:
    low = word.lower()
    if low in _KEYWORD_ONLY:
        return None
    if low in _SHORTHANDS:
        return DEFAULT_MODEL
    return word


def _option(key: str, raw: str, field: str) -> Any:
    if key in ("model", "parity_with"):
        if not raw:
            raise EmbedderError("must not be empty", field=field)
        return _model_word(raw) if key == "model" else raw
    if key in ("threads", "batch", "retries", "max_batch_tokens"):
        try:
            return None if key == "threads" and raw.lower() in ("", "auto", "none") else int(raw)
        except ValueError:
            what = "an integer >= 0" if key == "retries" else "a positive integer"
            raise EmbedderError(f"must be {what}, got {raw!r}", field=field) from None
    if key == "timeout":
        try:
            return float(raw)
        except ValueError:
            raise EmbedderError(
                f"must be a positive number of seconds, got {raw!r}", field=field
            ) from None
    if key in ("spin", "quantize"):
        low = raw.lower()
        if key == "spin" and low in ("", "auto", "none"):
            return None
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise EmbedderError(f"must be true or false, got {raw!r}", field=field)
    return raw.lower() if key in ("runtime", "dtype") else raw


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


__all__ = [
    "DEFAULT_MODEL",
    "DTYPES",
    "REMOTE_ID_PREFIX",
    "REMOTE_OPTIONS",
    "REMOTE_RUNTIME",
    "RUNTIMES",
    "EmbedderSpec",
]
