"""Settings the core shares with its edges: settings files and recall configuration.

A settings file is YAML or JSON (by suffix; YAML otherwise) holding one mapping in
the grouped layout of ``mnemoray.settings.serve.ServeSettings``. The ``recall`` group is
defined here because the CLI's ``recall`` command reads it too::

    recall:
      mode: hybrid                  # any RetrievalConfig field: the default for every app
      weights: {dense: 1.0, bm25: 0.2}
      apps:
        support-bot:                # per-app overrides, merged over the default
          recency_window: 0.1
          weights: {recency: 0.1}   # weights merge key by key

``RetrievalConfig`` keeps its own value rules; this module only turns strings
(environment, flags) into typed values and names the offending setting.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, create_model

from mnemoray.errors import ConfigError, MnemorayError
from mnemoray.memory.recall.config import RetrievalConfig

Group = TypeVar("Group", bound=BaseModel)

RETRIEVAL_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RetrievalConfig))


def load_settings_file(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML or JSON settings file; errors name the file."""
    path = Path(path).expanduser()
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(
            f"cannot read settings file {path}: {exc.strerror}", field="config"
        ) from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml  # Ray Serve's config format; a JSON file needs no yaml

            data = yaml.safe_load(text)
    except ValueError as exc:  # json.JSONDecodeError and yaml.YAMLError are ValueErrors
        raise ConfigError(f"{path} is not valid YAML/JSON: {exc}", field="config") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{path} must hold a mapping of settings, got {type(data).__name__}", field="config"
        )
    return dict(data)


def errors_to_config_error(exc: ValidationError, where: str = "") -> ConfigError:
    """pydantic's first error as a ConfigError whose field is the dotted path."""
    first = exc.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):  # raised by our own post-validation step
        return cause
    loc = ".".join(str(p) for p in first["loc"])
    field = ".".join(p for p in (where, loc) if p) or "settings"
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown setting"
    return ConfigError(msg, field=field)


def _optional_fields() -> dict[str, Any]:
    # RetrievalConfig's own annotations, each optional: an unset field keeps the
    # dataclass default (or, per app, the recall default).
    hints = get_type_hints(RetrievalConfig)
    return {name: (Optional[hints[name]], None) for name in RETRIEVAL_FIELDS}  # noqa: UP045


_Strict = ConfigDict(extra="forbid")
RetrievalOverrides: type[BaseModel] = create_model(
    "RetrievalOverrides", __config__=_Strict, **_optional_fields()
)


def _set_fields(model: BaseModel) -> dict[str, Any]:
    return {k: getattr(model, k) for k in RETRIEVAL_FIELDS if getattr(model, k) is not None}


def merge(low: Mapping[str, Any], high: Mapping[str, Any]) -> dict[str, Any]:
    """``high`` over ``low``, mapping by mapping: settings layers (a group given in two
    layers merges) and per-app recall overrides (weights merge key by key)."""
    out = dict(low)
    for key, value in high.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _build(values: Mapping[str, Any], where: str) -> RetrievalConfig:
    try:
        return RetrievalConfig(**values)
    except MnemorayError as exc:
        raise ConfigError(exc.reason, field=_join(where, exc.field)) from None
    except ValueError as exc:  # a value rule of RetrievalConfig without a field
        raise ConfigError(str(exc), field=where) from None


def _join(where: str, field: str | None) -> str:
    return f"{where}.{field}" if field else where


def retrieval_config(
    data: Mapping[str, Any] | None = None, *, where: str = "recall"
) -> RetrievalConfig:
    """A RetrievalConfig from a mapping of its fields (strings are converted).

    Errors are ``ConfigError`` (an ``InvalidInput``) whose field is ``where.<field>``.
    """
    try:
        model = RetrievalOverrides.model_validate(dict(data or {}))
    except ValidationError as exc:
        raise errors_to_config_error(exc, where) from None
    return _build(_set_fields(model), where)


class RecallSettings(RetrievalOverrides):
    """The ``recall`` group: RetrievalConfig fields (the default for every app) and
    ``apps.<app_name>.<field>`` overrides merged over it."""

    apps: dict[str, RetrievalOverrides] = Field(
        default_factory=dict, description="per-app RetrievalConfig overrides"
    )
    _configs: dict[str | None, RetrievalConfig] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        # Built once, so a bad value fails when the settings load, naming its key.
        default = _set_fields(self)
        configs: dict[str | None, RetrievalConfig] = {None: _build(default, "recall")}
        for app, over in self.apps.items():
            configs[app] = _build(merge(default, _set_fields(over)), f"recall.apps.{app}")
        self._configs = configs

    def retrieval_for(self, app_name: str | None = None) -> RetrievalConfig:
        """The RetrievalConfig of ``app_name``: its overrides over the recall default."""
        return self._configs.get(app_name, self._configs[None])

    @property
    def default(self) -> RetrievalConfig:
        """The config of every app without overrides."""
        return self._configs[None]

    @property
    def app_configs(self) -> dict[str, RetrievalConfig]:
        """App -> its merged config, for the apps with overrides (``MemoryService``'s
        ``app_configs``)."""
        return {app: cfg for app, cfg in self._configs.items() if app is not None}


def settings_group(model: type[Group], name: str, data: Mapping[str, Any] | None) -> Group:
    """The ``name`` group of the settings from a mapping; errors name ``name.<field>``."""
    try:
        return model.model_validate(dict(data or {}))
    except ValidationError as exc:
        raise errors_to_config_error(exc, name) from None


def settings_group_from_file(model: type[Group], name: str, path: str | Path) -> Group:
    """The ``name`` group of a settings file (other groups are not read here)."""
    return settings_group(model, name, load_settings_file(path).get(name))


def recall_settings(data: Mapping[str, Any] | None) -> RecallSettings:
    """The ``recall`` group from a mapping; errors name ``recall.<field>``."""
    return settings_group(RecallSettings, "recall", data)


def recall_settings_from_file(path: str | Path) -> RecallSettings:
    """The ``recall`` group of a settings file."""
    return settings_group_from_file(RecallSettings, "recall", path)


__all__ = [
    "RETRIEVAL_FIELDS",
    "RecallSettings",
    "RetrievalOverrides",
    "errors_to_config_error",
    "load_settings_file",
    "merge",
    "recall_settings",
    "recall_settings_from_file",
    "retrieval_config",
]
