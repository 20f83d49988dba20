"""The ``compaction`` settings group: automatic compaction and prompts per app.

Layout::

    compaction:
      enabled: true            # run the AutoCompactor in each ingress replica
      workers: 1               # its threads (summaries run there, off the request path)
      interval, overlap, token_threshold, keep_last, boundaries, topic_shift_threshold
      compaction_prompt: null  # the summarizer's instructions for compaction
      memory_prompt: null      # ... and for memory ingestion (LLM summarizers)
      apps:
        <app_name>: {any of the fields above but enabled/workers}

A session created with a ``compaction`` object overrides its app's policy
fields (``mnemoray.compaction.policy``). Prompts only steer LLM summarizers;
the extractive default has none.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from mnemoray.compaction.compactor import CompactionConfig
from mnemoray.compaction.fields import POLICY_FIELDS, BoundaryKind, default, model_field, renamed
from mnemoray.errors import ConfigError, InvalidInput

Prompt = str | None
PROMPT_MAX_CHARS = 20_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AppCompactionSettings(_Strict):
    """One app's overrides: only the fields given replace the default's."""

    interval: int | None = model_field("interval", None)
    overlap: int | None = model_field("overlap", None)
    token_threshold: int | None = model_field("token_threshold", None)
    keep_last: int | None = model_field("keep_last", None)
    boundaries: list[BoundaryKind] | None = model_field("boundaries", None)
    topic_shift_threshold: float | None = model_field("topic_shift_threshold", None)
    compaction_prompt: Prompt = Field(None, max_length=PROMPT_MAX_CHARS)
    memory_prompt: Prompt = Field(None, max_length=PROMPT_MAX_CHARS)


class CompactionSettings(_Strict):
    """Automatic compaction: the default policy, prompts and per-app overrides."""

    enabled: bool = Field(
        True,
        description="compact sessions after appends, in the "
        "background (a session's policy still decides whether it does)",
    )
    workers: int = Field(1, ge=1, le=16, description="compaction threads per replica")
    interval: int | None = model_field("interval")
    overlap: int = model_field("overlap")
    token_threshold: int | None = model_field(
        "token_threshold", default("token_threshold", serve=True)
    )
    keep_last: int = model_field("keep_last")
    boundaries: list[BoundaryKind] = model_field("boundaries")
    topic_shift_threshold: float = model_field("topic_shift_threshold")
    compaction_prompt: Prompt = Field(None, max_length=PROMPT_MAX_CHARS)
    memory_prompt: Prompt = Field(None, max_length=PROMPT_MAX_CHARS)
    apps: dict[str, AppCompactionSettings] = Field(default_factory=dict)
    _configs: dict[str | None, CompactionConfig] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        # Built once, so a bad combination fails when the settings load, naming its key.
        default = self._build(None, {k: getattr(self, k) for k in POLICY_FIELDS})
        self._configs = {None: default}
        for app, over in self.apps.items():
            given = {
                k: v for k, v in over.model_dump(exclude_unset=True).items() if k in POLICY_FIELDS
            }
            self._configs[app] = self._build(app, given, default)

    @staticmethod
    def _build(
        app: str | None, values: dict[str, Any], base: CompactionConfig | None = None
    ) -> CompactionConfig:
        try:
            return (base or CompactionConfig()).with_overrides(values)
        except InvalidInput as exc:
            where = "compaction" if app is None else f"compaction.apps.{app}"
            raise renamed(exc, where, ConfigError) from None

    def policy_for(self, app_name: str) -> CompactionConfig:
        """The app's policy (its overrides over the default)."""
        return self._configs.get(app_name, self._configs[None])

    def compaction_prompt_for(self, app_name: str) -> str | None:
        return self._prompt(app_name, "compaction_prompt")

    def memory_prompt_for(self, app_name: str) -> str | None:
        return self._prompt(app_name, "memory_prompt")

    def _prompt(self, app_name: str, name: str) -> str | None:
        app = self.apps.get(app_name)
        if app is not None and name in app.model_fields_set:
            return getattr(app, name)
        return getattr(self, name)
