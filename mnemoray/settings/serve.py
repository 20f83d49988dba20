"""The serving configuration, grouped, and the one loader that layers it.

Layout (every key is reachable the same way from each layer)::

    store: /var/lib/mnemoray/store   # the memory store (required; or lancedb://DIR)
    shards: null                     # shards of a NEW store
    server:    host, port, ingress (direct | proxy), replicas, api keys, limits, index layout
    recall:    RetrievalConfig fields + apps.<app_name>.<field> (mnemoray.settings.base)
    ingestion: trigger, sessions_db, artifacts_dir
    models:    embedder, summarizer, query encoding
    hooks:     webhook_url, webhook_events, webhook_timeout_s (memory lifecycle events)
    hygiene:   per-user limits + eviction, consolidation, apps.<app_name>
               (mnemoray.settings.hygiene)
    compaction: automatic compaction policy + prompts, apps.<app_name> overrides
                (mnemoray.settings.compaction)
    scopes:    memory_scope (user | agent), apps.<app_name>.read_from / share_with:
               agent-only memories and cross-app sharing (mnemoray.settings.scopes)

Layers, highest first: **flags > environment > file > defaults**.

- flags: ``build_app(args)`` / ``serve run mnemoray.serve.app:build_app store=/s server.replicas=2``
  (dotted keys; strings are converted: "2" -> 2, "true" -> True, a JSON object or
  list -> a mapping or list), the CLI's options and ``--set KEY=VALUE``.
- environment: ``MNEMORAY_<GROUP>__<FIELD>`` (nested delimiter ``__``, case-insensitive,
  so app names under ``MNEMORAY_RECALL__APPS__<APP>__...`` are lower-cased; a
  mapping value may be JSON): ``MNEMORAY_STORE``, ``MNEMORAY_SERVER__REPLICAS=2``,
  ``MNEMORAY_RECALL__WEIGHTS__BM25=0.2``.
- file: YAML or JSON in the same layout, named by the flag ``config`` or by
  ``MNEMORAY_CONFIG``.

Unknown keys in any layer are a ``ConfigError`` naming the key, so a typo never
silently falls back to a default; the flat keys of earlier versions name their new
place. Replicas receive the fully resolved settings (``parse_settings``) and read no
environment of their own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as EnvDecodeError

from mnemoray.errors import ConfigError
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.store.protocol import absolute_location, parse_location
from mnemoray.settings.base import RecallSettings, errors_to_config_error, load_settings_file, merge
from mnemoray.settings.compaction import CompactionSettings
from mnemoray.settings.hygiene import HygieneSettings
from mnemoray.settings.scopes import ScopeSettings
from mnemoray.settings.serve_groups import (
    HookSettings,
    IngestionSettings,
    ModelSettings,
    ServerSettings,
    StrictModel,
    WriteSettings,
    direct_ingress_as_ingress,
)

ENV_PREFIX = "MNEMORAY_"
ENV_DELIMITER = "__"
CONFIG_KEY = "config"  # the flag (and MNEMORAY_CONFIG) that names a settings file

# Variables with this prefix that other parts of the library read; not settings.
LIBRARY_ENV = frozenset({"ONNX_CACHE", "CRASH_AFTER", "API_KEY"})


class SettingsError(ConfigError):
    """The serving configuration is invalid; ``field`` names the key."""


class ServeSettings(StrictModel):
    store: str = Field(
        ..., min_length=1, description="memory store: a directory, parquet://DIR or lancedb://DIR"
    )
    shards: int | None = Field(None, ge=1, description="shards of a NEW store")
    server: ServerSettings = Field(default_factory=ServerSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    ingestion: IngestionSettings = Field(default_factory=IngestionSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    hooks: HookSettings = Field(default_factory=HookSettings)
    hygiene: HygieneSettings = Field(default_factory=HygieneSettings)  # limits, consolidation
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    scopes: ScopeSettings = Field(default_factory=ScopeSettings)  # agents, sharing
    writes: WriteSettings = Field(default_factory=WriteSettings)  # background merge

    @field_validator("store")
    @classmethod
    def _expand(cls, v: str) -> str:
        # A directory, parquet://DIR or lancedb://DIR (mnemoray.memory.store.protocol).
        return absolute_location(v)

    @property
    def store_dir(self) -> Path:
        """The store's directory (``store`` without its scheme)."""
        return parse_location(self.store)[1]

    @property
    def sessions_path(self) -> str:
        return self.ingestion.sessions_db or str(self.store_dir / "sessions.db")

    @property
    def artifacts_path(self) -> str:
        return self.ingestion.artifacts_dir or str(self.store_dir / "artifacts")

    def retrieval_for(self, app_name: str | None = None) -> RetrievalConfig:
        """The app's RetrievalConfig: ``recall.apps.<app_name>`` over the recall default."""
        return self.recall.retrieval_for(app_name)


TOP_LEVEL = frozenset(ServeSettings.model_fields)

# The flat keys of earlier versions -> their place now (an error names it).
MOVED: dict[str, str] = {
    **{
        k: f"server.{k}"
        for k in (
            "replicas",
            "max_ongoing_requests",
            "num_cpus",
            "index_mode",
            "index_replicas",
            "offload_search",
            "reload_interval_s",
            "api_keys",
            "api_key_digests",
            "allow_remote_without_keys",
            "max_body_bytes",
        )
    },
    **{k: f"ingestion.{k}" for k in ("trigger", "sessions_db", "artifacts_dir")},
    **{
        k: f"models.{k}"
        for k in (
            "embedder",
            "query_embedder",
            "query_threads",
            "batch_max_size",
            "embedder_deployment",
            "embedder_replicas",
            "summarizer",
            "summarizer_options",
            "summarizer_deployment",
            "summarizer_replicas",
        )
    },
}


def _env_name(path: str) -> str:
    return ENV_PREFIX + path.replace(".", ENV_DELIMITER).upper()


def _check_keys(data: Mapping[str, Any], *, env: bool = False) -> None:
    for key in data:
        if key in TOP_LEVEL:
            continue
        name = _env_name(key) if env else key
        if key in MOVED:
            new = _env_name(MOVED[key]) if env else MOVED[key]
            raise SettingsError(f"moved: use {new}", field=name)
        known = (
            [_env_name(k) for k in sorted(TOP_LEVEL | {CONFIG_KEY})] if env else sorted(TOP_LEVEL)
        )
        raise SettingsError("unknown setting; known: " + ", ".join(known), field=name)


def parse_settings(args: Mapping[str, Any] | ServeSettings | None) -> ServeSettings:
    """Validate a complete settings mapping (no layering, no environment)."""
    if isinstance(args, ServeSettings):
        return args
    data = dict(args or {})
    _check_keys(data)
    try:
        return ServeSettings.model_validate(data)
    except ValidationError as exc:
        err = errors_to_config_error(exc)
        raise SettingsError(err.reason, field=err.field) from None


# -- layers --------------------------------------------------------------------------------
def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"server.replicas": "2"}`` -> ``{"server": {"replicas": "2"}}`` (nested values
    are kept; a key given twice is an error)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = str(key).split(".")
        tree: Any = value
        for part in reversed([*parents, leaf]):
            tree = {part: tree}
        _add(out, tree, "")
    return out


def _add(into: dict[str, Any], tree: Mapping[str, Any], where: str) -> None:
    for key, value in tree.items():
        path = f"{where}.{key}" if where else key
        if isinstance(value, Mapping) and isinstance(into.setdefault(key, {}), dict):
            _add(into[key], value, path)  # copies: the caller's mappings stay untouched
        elif key not in into:
            into[key] = value
        else:
            raise SettingsError("given twice", field=path)


class _EnvSchema(ServeSettings, BaseSettings):
    """Only its schema and config are used: by ``EnvSettingsSource`` to explode and
    decode ``MNEMORAY_*`` variables (ServeSettings itself never reads the environment)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        case_sensitive=False,
        extra="forbid",
    )


class _EnvSource(EnvSettingsSource):
    def __init__(self, env: Mapping[str, str]) -> None:
        self._given = {k.lower(): v for k, v in env.items()}
        super().__init__(_EnvSchema)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._given


def settings_from_env(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The environment layer: ``MNEMORAY_<GROUP>__<FIELD>`` -> nested settings.

    ``MNEMORAY_CONFIG`` is returned under ``config`` (the settings file to read).
    """
    env = os.environ if env is None else env
    ours = {
        k: v
        for k, v in env.items()
        if k.upper().startswith(ENV_PREFIX) and v is not None and v.strip() != ""
    }
    heads: dict[str, str] = {}
    for name in ours:
        rest = name[len(ENV_PREFIX) :].upper()
        if rest in LIBRARY_ENV:
            continue
        heads[rest.split(ENV_DELIMITER)[0].lower()] = name
    out: dict[str, Any] = {}
    config = heads.pop(CONFIG_KEY, None)
    if config is not None:
        out[CONFIG_KEY] = ours[config]
    # The old flat names (MNEMORAY_API_KEYS among them) are refused, never ignored.
    _check_keys(heads, env=True)
    try:
        values = _EnvSource({k: v for k, v in ours.items() if k.upper() != _env_name(CONFIG_KEY)})()
    except EnvDecodeError as exc:  # a JSON value that does not parse
        raise SettingsError(str(exc), field=ENV_PREFIX + "*") from None
    return {**values, **out}


def load_settings(
    flags: Mapping[str, Any] | None = None, *, env: Mapping[str, str] | None = None
) -> ServeSettings:
    """Settings from defaults < file < environment < ``flags``.

    ``flags`` may use dotted keys (``server.replicas``) or nested mappings; its
    ``config`` (else ``MNEMORAY_CONFIG``) names the settings file. ``env`` defaults
    to ``os.environ``.
    """
    high = nest({k: _json_value(v) for k, v in (flags or {}).items()})
    envs = settings_from_env(env)
    path = high.pop(CONFIG_KEY, None) or envs.pop(CONFIG_KEY, None)
    envs.pop(CONFIG_KEY, None)
    file = load_settings_file(path) if path else {}
    if path:
        try:
            _check_keys(file)
        except SettingsError as exc:
            raise SettingsError(f"{exc.reason} (in {path})", field=exc.field) from None
    file, envs, high = (_deprecated_in(layer) for layer in (file, envs, high))
    return parse_settings(merge(merge(file, envs), high))


def _deprecated_in(layer: dict[str, Any]) -> dict[str, Any]:
    """``layer`` with its deprecated keys read as their new ones, before layering: a
    file's ``server.direct_ingress: true`` then loses to ``--ingress proxy``."""
    server = layer.get("server")
    if not isinstance(server, dict):
        return layer
    try:
        return {**layer, "server": direct_ingress_as_ingress(server)}
    except ValueError as exc:
        raise SettingsError(str(exc), field="server.direct_ingress") from None


def _json_value(value: Any) -> Any:
    # `serve run` passes every argument as a string: a mapping or a list comes as JSON.
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
