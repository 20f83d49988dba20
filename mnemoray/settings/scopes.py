"""The ``scopes`` settings group: agent-only memories and cross-app sharing, per app.

    scopes:
      memory_scope: user        # default of every app: distilled memories are shared
      apps:                     # by all its agents; "agent": each session's agent owns them
        support:
          memory_scope: agent
          read_from: [shop]     # support recalls the user's memories of shop ...
        shop:
          share_with: [support] # ... because shop agrees to share them with support

Both sides must list each other, or nothing is shared (mnemoray.memory.store.scopes). Defined
here, beside ``recall`` and ``hygiene``, because the CLI reads it from the same file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from mnemoray.memory.store.scopes import AppScope, ScopePolicy
from mnemoray.schemas.common import Id
from mnemoray.settings.base import settings_group, settings_group_from_file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AppScopeSettings(_Strict):
    memory_scope: Literal["user", "agent"] | None = Field(
        None, description="override of scopes.memory_scope for this app"
    )
    read_from: list[Id] = Field(
        default_factory=list,
        max_length=100,
        description="apps "
        "whose memories of the same user this app recalls, when "
        "they list it in share_with",
    )
    share_with: list[Id] = Field(
        default_factory=list,
        max_length=100,
        description="apps "
        "that may recall this app's shared (not agent-only) "
        "memories of a user, when they list it in read_from",
    )


class ScopeSettings(_Strict):
    memory_scope: Literal["user", "agent"] = Field(
        "user",
        description="user: a session's memories are seen by every agent of the "
        "app; agent: only by the agent that held the session",
    )
    apps: dict[str, AppScopeSettings] = Field(default_factory=dict)
    _policy: ScopePolicy = PrivateAttr(default_factory=ScopePolicy)

    def model_post_init(self, context: Any) -> None:
        default = AppScope(memory_scope=self.memory_scope)
        self._policy = ScopePolicy(
            default=default,
            apps={
                app: AppScope(
                    memory_scope=over.memory_scope or self.memory_scope,
                    read_from=tuple(over.read_from),
                    share_with=tuple(over.share_with),
                )
                for app, over in self.apps.items()
            },
        )

    @property
    def policy(self) -> ScopePolicy:
        """What ``MemoryService.scopes`` takes."""
        return self._policy


def scope_settings(data: Mapping[str, Any] | None) -> ScopeSettings:
    """The ``scopes`` group from a mapping; errors name ``scopes.<field>``."""
    return settings_group(ScopeSettings, "scopes", data)


def scope_settings_from_file(path: str | Path) -> ScopeSettings:
    """The ``scopes`` group of a settings file."""
    return settings_group_from_file(ScopeSettings, "scopes", path)


__all__ = ["AppScopeSettings", "ScopeSettings", "scope_settings", "scope_settings_from_file"]
