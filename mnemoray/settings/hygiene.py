"""The ``hygiene`` settings group: consolidation and per-user limits, per app.

    hygiene:
      consolidation:            # ConsolidationPolicy fields (mnemoray.memory.hygiene.consolidate)
        min_age_s: 2592000      # memories older than 30 days ...
        originals: expire       # ... are merged; the originals are forgotten 30 days later
      limits:                   # EvictionPolicy fields (mnemoray.memory.hygiene.evict)
        max_memories: 1000
        policy: least_recently_recalled     # or oldest / lowest_value
      apps:
        support-bot:            # per-app overrides, merged over the above
          limits: {max_memories: 200, policy: lowest_value}
          consolidation: {enabled: false}

Serve reads it from its settings (``mnemoray.settings.serve``); `mnemoray memory consolidate`
and ``python -m mnemoray.jobs.consolidate`` from the same settings file. Defined here, like the
``recall`` group, because the CLI reads it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from mnemoray.errors import ConfigError, MnemorayError
from mnemoray.memory.hygiene.consolidate import ConsolidationPolicy
from mnemoray.memory.hygiene.evict import EvictionPolicy
from mnemoray.settings.base import merge, settings_group, settings_group_from_file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConsolidationOverrides(_Strict):
    enabled: bool | None = None
    min_age_s: float | None = None
    period_s: float | None = None
    min_group: int | None = None
    max_group: int | None = None
    kinds: list[str] | None = None
    originals: Literal["keep", "expire"] | None = None
    expire_after_s: float | None = None


class LimitOverrides(_Strict):
    max_memories: int | None = Field(None, ge=0, description="live memories per user; 0: no limit")
    policy: Literal["least_recently_recalled", "oldest", "lowest_value"] | None = None
    half_life_s: float | None = None


class AppHygiene(_Strict):
    consolidation: ConsolidationOverrides = Field(default_factory=ConsolidationOverrides)
    limits: LimitOverrides = Field(default_factory=LimitOverrides)


def _set(model: BaseModel) -> dict[str, Any]:
    return {k: v for k, v in model.model_dump().items() if v is not None}


def _build(cls: type, values: Mapping[str, Any], where: str) -> Any:
    try:
        return cls(**values)
    except MnemorayError as exc:
        raise ConfigError(
            exc.reason, field=f"{where}.{exc.field}" if exc.field else where
        ) from None


class HygieneSettings(AppHygiene):
    track_usage: bool | None = Field(
        None, description="count recalls per memory (None: when a limit's policy needs them)"
    )
    usage_flush_s: float = Field(
        30.0, gt=0, description="how often recall counts are written to STORE/hygiene/usage.db"
    )
    apps: dict[str, AppHygiene] = Field(default_factory=dict)
    _consolidation: dict[str | None, ConsolidationPolicy] = PrivateAttr(default_factory=dict)
    _limits: dict[str | None, EvictionPolicy] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        # Built once, so a bad value fails when the settings load, naming its key.
        base_c, base_l = _set(self.consolidation), _set(self.limits)
        self._consolidation = {None: _build(ConsolidationPolicy, base_c, "hygiene.consolidation")}
        self._limits = {None: _build(EvictionPolicy, base_l, "hygiene.limits")}
        for app, over in self.apps.items():
            where = f"hygiene.apps.{app}"
            self._consolidation[app] = _build(
                ConsolidationPolicy,
                merge(base_c, _set(over.consolidation)),
                f"{where}.consolidation",
            )
            self._limits[app] = _build(
                EvictionPolicy, merge(base_l, _set(over.limits)), f"{where}.limits"
            )

    def consolidation_for(self, app_name: str | None = None) -> ConsolidationPolicy:
        return self._consolidation.get(app_name, self._consolidation[None])

    def limits_for(self, app_name: str | None = None) -> EvictionPolicy:
        return self._limits.get(app_name, self._limits[None])

    @property
    def app_consolidation(self) -> dict[str, ConsolidationPolicy]:
        return {a: p for a, p in self._consolidation.items() if a is not None}

    @property
    def app_limits(self) -> dict[str, EvictionPolicy]:
        return {a: p for a, p in self._limits.items() if a is not None}

    @property
    def usage_needed(self) -> bool:
        """Whether recall counts are kept: asked for, or a limit ranks by them."""
        if self.track_usage is not None:
            return self.track_usage
        return any(p.limited and p.policy != "oldest" for p in self._limits.values())


def hygiene_settings(data: Mapping[str, Any] | None) -> HygieneSettings:
    """The ``hygiene`` group from a mapping; errors name ``hygiene.<field>``."""
    return settings_group(HygieneSettings, "hygiene", data)


def hygiene_settings_from_file(path: str | Path) -> HygieneSettings:
    """The ``hygiene`` group of a settings file."""
    return settings_group_from_file(HygieneSettings, "hygiene", path)


__all__ = [
    "AppHygiene",
    "ConsolidationOverrides",
    "HygieneSettings",
    "LimitOverrides",
    "hygiene_settings",
    "hygiene_settings_from_file",
]
