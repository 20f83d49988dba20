"""The one configuration of a backfill, for both engines.

``BackfillConfig`` holds what every engine honours; ``RayOptions`` groups what
only the Ray Data engine does (its fields are None unless given, so an engine
that cannot honour one can say which was given instead of ignoring it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from mnemoray.embedders import Embedder, EmbedderSpec
from mnemoray.errors import InvalidInput
from mnemoray.memory.store.scopes import ScopePolicy
from mnemoray.summarizers import Summarizer, available_summarizers
from mnemoray.summarizers import check_options as check_summarizer_options

DEFAULT_COMMIT_EVERY = 256

# The command-line flag of each field, for errors that name what the user typed.
FLAGS = {
    "archive": "--archive",
    "store": "--store",
    "shards": "--shards",
    "summarizer": "--summarizer",
    "summarizer_options": "--summarizer-option",
    "summarize": "--no-summarize",
    "embedder": "--embedder",
    "commit_every": "--commit-every",
    "progress_interval_s": "--progress-every",
    "workers": "--workers",
    "batch_size": "--batch-size",
    "gpus_per_embedder": "--gpus-per-embedder",
    "llm_concurrency": "--llm-concurrency",
    "embed_batch_size": "--embed-batch-size",
    "dtype": "--embed-dtype",
    "max_batch_tokens": "--embed-batch-tokens",
    "llm_batch_size": "--llm-batch-size",
    "address": "--ray-address",
}


def _positive_int(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"must be a positive integer, got {value!r}", field=name)


@dataclass(frozen=True)
class RayOptions:
    """How the Ray Data engine runs. None: the engine's default (``RAY_DEFAULTS``)."""

    # Actors per pool: distill, and embed on CPU (GPUs: per GPU). None: ``default_workers``
    # of the cluster the job runs on.
    workers: int | None = None
    batch_size: int | None = None  # sessions per distill / embed batch
    actor_cpus: float | None = None  # CPUs per distill / embed actor
    task_cpus: float | None = None  # CPUs per read / validate / write task
    gpus_per_embedder: float | None = None  # 0: embed on CPU; else on cuda
    # Sessions per embed batch (None: batch_size on CPU, GPU_EMBED_BATCH on a GPU, where
    # a forward pass needs thousands of texts to keep the device busy).
    embed_batch_size: int | None = None
    llm_concurrency: int | None = None  # vLLM engine replicas (each takes tp*pp GPUs)
    llm_batch_size: int | None = None  # rows per vLLM engine batch
    address: str | None = None  # None: RAY_ADDRESS if set (ray job submit), else local Ray

    def given(self) -> dict[str, Any]:
        """The options set explicitly (not None)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }

    def resolved(self) -> RayOptions:
        """Every option with a value: the given ones, else ``RAY_DEFAULTS``."""
        return replace(RAY_DEFAULTS, **self.given())

    def for_cluster(self, resources: Mapping[str, float]) -> RayOptions:
        """These options with ``workers``, where not given, sized from the cluster's
        ``resources`` (``default_workers``)."""
        if self.workers is not None:
            return self
        return replace(self, workers=default_workers(resources))

    def check(self) -> None:
        opts = self.resolved()
        for name in ("batch_size", "llm_concurrency", "llm_batch_size"):
            _positive_int(getattr(opts, name), f"ray.{name}")
        if opts.workers is not None:
            _positive_int(opts.workers, "ray.workers")
        if opts.embed_batch_size is not None:
            _positive_int(opts.embed_batch_size, "ray.embed_batch_size")
        for name in ("actor_cpus", "task_cpus"):
            if not getattr(opts, name) > 0:
                raise InvalidInput(f"must be > 0, got {getattr(opts, name)!r}", field=f"ray.{name}")
        assert opts.gpus_per_embedder is not None  # RAY_DEFAULTS sets it
        if opts.gpus_per_embedder < 0:
            raise InvalidInput(
                f"must be >= 0, got {opts.gpus_per_embedder!r}", field="ray.gpus_per_embedder"
            )


# RayOptions fields that are command-line flags of their own (the CPU shares are not).
RAY_FLAGS = (
    "workers",
    "batch_size",
    "gpus_per_embedder",
    "embed_batch_size",
    "llm_concurrency",
    "llm_batch_size",
)
# Sessions per embed batch on a GPU (about 4,000 memories: a few forward passes' worth).
GPU_EMBED_BATCH = 1024
# Fractions, so the embedded default fits a 2-core machine: one distill actor and one
# embed actor (0.5 CPU each) leave a core for the tasks. ``workers`` stays None: it is
# sized from the cluster when the job starts (``default_workers``).
RAY_DEFAULTS = RayOptions(
    workers=None,
    batch_size=64,
    actor_cpus=0.5,
    task_cpus=0.25,
    gpus_per_embedder=0.0,
    llm_concurrency=1,
    llm_batch_size=64,
    address=None,
)


def default_workers(resources: Mapping[str, float]) -> int:
    """Actors per pool when ``--workers`` is not given: half the cluster's CPUs (1 on the
    2-core default). On CPUs that gives the distill and the embed pools one core's worth
    of actors each, the embed actors splitting the cores between them (``embed_layout``);
    with embedding on GPUs, distill actors enough to keep the GPUs fed, where one actor
    left the GPU waiting on it."""
    return max(1, int(resources.get("CPU", 0)) // 2)


@dataclass(frozen=True)
class BackfillConfig:
    """What to backfill where, and how; the same for every engine.

    ``summarizer`` and ``embedder`` may be objects for the in-process engine; the
    Ray engine builds its own in its workers and takes names (see its ``check``).
    """

    archive: str | Path
    store: str | Path
    shards: int | None = None  # of a new store (an existing store keeps its own)
    summarizer: str | Summarizer = "extractive"
    summarizer_options: dict[str, Any] = field(default_factory=dict)
    # False: raw chunks only (no summaries or facts); no summarizer is built or called.
    summarize: bool = True
    # An EmbedderSpec or its string ("default", "none", "torch", "./model,threads=2"; model,
    # runtime, device and threads are the spec's, for both engines), or a built Embedder.
    embedder: str | EmbedderSpec | Embedder | None = "default"
    commit_every: int = DEFAULT_COMMIT_EVERY  # sessions per manifest commit
    chunk_turns: int = 4
    ttl_s: float | None = None
    # Whose memories they are, per app (the `scopes` settings group; None: all shared).
    scopes: ScopePolicy | None = None
    run_id: str | None = None  # None: a new one
    progress_interval_s: float = 10.0  # between progress lines when not on a terminal
    ray: RayOptions | None = None  # the Ray Data engine only

    def check(self) -> None:
        """Engine-neutral checks; each engine adds its own (``Engine.check``)."""
        if self.shards is not None:
            _positive_int(self.shards, "shards")
        for name in ("commit_every", "chunk_turns"):
            _positive_int(getattr(self, name), name)
        if not isinstance(self.summarize, bool):
            raise InvalidInput(f"must be true or false, got {self.summarize!r}", field="summarize")
        if not self.summarize and (self.summarizer != "extractive" or self.summarizer_options):
            # A summarizer named with --no-summarize would be silently unused.
            raise InvalidInput(
                "stores raw chunks only and uses no summarizer; drop "
                "--summarizer / --summarizer-option",
                field="summarize",
            )
        if isinstance(self.summarizer, str) and self.summarizer not in available_summarizers():
            raise InvalidInput(
                f"unknown {self.summarizer!r}; known: {', '.join(available_summarizers())}",
                field="summarizer",
            )
        if not isinstance(self.summarizer_options, dict):
            raise InvalidInput("must be a dict", field="summarizer_options")
        if isinstance(self.summarizer, str):  # a backend's missing option fails before work
            check_summarizer_options(self.summarizer, self.summarizer_options)
        if self.progress_interval_s < 0:
            raise InvalidInput(
                f"must be >= 0, got {self.progress_interval_s!r}", field="progress_interval_s"
            )
        if not isinstance(self.embedder, Embedder):
            EmbedderSpec.parse(self.embedder)  # a bad spec fails before any work
        if self.ray is not None:
            self.ray.check()

    @classmethod
    def from_flags(
        cls,
        *,
        summarizer_options: Sequence[str] = (),
        ray_address: str | None = None,
        config: str | Path | None = None,
        embed_dtype: str | None = None,
        embed_batch_tokens: int | None = None,
        **flags: Any,
    ) -> BackfillConfig:
        """The config the command-line flags name (``mnemoray backfill`` and ``python -m
        mnemoray.jobs.backfill``): flat flags, ``KEY=VALUE`` summarizer options, the Ray
        options (None: not given) split into :class:`RayOptions`, and ``config``: a
        settings file whose ``scopes`` group says whose memories they are.
        ``embed_dtype`` / ``embed_batch_tokens`` set the embedder spec's ``dtype`` /
        ``max_batch_tokens`` (on a GPU when ``gpus_per_embedder`` gives one)."""
        from mnemoray.settings.scopes import scope_settings_from_file

        ray = {name: flags.pop(name) for name in RAY_FLAGS if name in flags}
        if embed_dtype is not None or embed_batch_tokens is not None:
            spec = on_gpus(
                EmbedderSpec.parse(flags.get("embedder", "default")), ray.get("gpus_per_embedder")
            )
            try:
                flags["embedder"] = spec.override(
                    dtype=embed_dtype, max_batch_tokens=embed_batch_tokens
                )
            except InvalidInput as exc:  # name the flag that was typed
                raise InvalidInput(exc.reason, field=flag_of(exc.field or "embedder")) from None
        scopes = scope_settings_from_file(config).policy if config is not None else None
        return cls(
            summarizer_options=parse_key_values(
                list(summarizer_options), field="--summarizer-option"
            ),
            ray=RayOptions(address=ray_address, **ray),
            scopes=scopes,
            **flags,
        )

    def public(self) -> dict[str, Any]:
        """The config as recorded in the run report: names for objects, option keys only
        (options may hold secrets)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["archive"], out["store"] = str(self.archive), str(self.store)
        if not isinstance(self.summarizer, str):
            out["summarizer"] = getattr(self.summarizer, "name", type(self.summarizer).__name__)
        if isinstance(self.embedder, Embedder):
            out["embedder"] = self.embedder.model_id
        elif isinstance(self.embedder, EmbedderSpec):
            out["embedder"] = str(self.embedder)
        out["summarizer_options"] = sorted(self.summarizer_options)
        out["ray"] = self.ray.given() if self.ray is not None else None
        out["scopes"] = (
            None
            if self.scopes is None
            else {app: scope.memory_scope for app, scope in sorted(self.scopes.apps.items())}
            | {"*": self.scopes.default.memory_scope}
        )
        return out


def parse_key_values(pairs: list[str], *, field: str = "summarizer_options") -> dict[str, Any]:
    """``KEY=VALUE`` strings as a dict; values are parsed as JSON when they are JSON."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"expected KEY=VALUE, got {pair!r}", field=field)
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options


def on_gpus(spec: EmbedderSpec, gpus_per_embedder: float | None) -> EmbedderSpec:
    """``spec`` as the embed actors run it: on cuda when they hold GPUs (a remote
    server's model runs on the server's devices)."""
    if gpus_per_embedder and spec.device == "cpu" and not spec.remote and spec.model is not None:
        return spec.override(device="cuda")
    return spec


def flag_of(name: str) -> str:
    """``--workers`` for ``workers`` / ``ray.workers``; the field name if it has no flag."""
    return FLAGS.get(name.removeprefix("ray."), name)


__all__ = [
    "DEFAULT_COMMIT_EVERY",
    "FLAGS",
    "GPU_EMBED_BATCH",
    "RAY_DEFAULTS",
    "BackfillConfig",
    "RayOptions",
    "default_workers",
    "flag_of",
    "on_gpus",
    "parse_key_values",
]
