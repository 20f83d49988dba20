"""The compaction policy's fields, once: names, defaults, bounds and descriptions.

:class:`~mnemoray.compaction.compactor.CompactionConfig` (in-process), the HTTP
``SessionCompactionIn`` and the ``compaction`` settings group all read them
from here, so a default or a bound cannot drift between surfaces. One
deliberate difference: in-process the token trigger is off unless asked for,
while ``mnemoray serve`` compacts by tokens out of the box (``SERVE_DEFAULTS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import Field

from mnemoray.errors import InvalidInput, MnemorayError

BoundaryKind = Literal["topic_shift", "task_done", "phrase"]
BOUNDARY_KINDS: tuple[str, ...] = get_args(BoundaryKind)
CONFIG_PREFIX = "CompactionConfig."  # the field prefix CompactionConfig's errors carry


@dataclass(frozen=True)
class PolicyField:
    default: Any
    description: str
    ge: float | None = None
    le: float | None = None
    optional: bool = False  # None is allowed (and turns that trigger off)


FIELDS: dict[str, PolicyField] = {
    "interval": PolicyField(
        None, "compact every N new (completed) invocations; null: off", ge=1, optional=True
    ),
    "overlap": PolicyField(1, "invocations re-included from the previous window", ge=0),
    "token_threshold": PolicyField(
        None,
        "compact when a compile would show more tokens of history than this; null: off",
        ge=1,
        optional=True,
    ),
    "keep_last": PolicyField(
        3, "the newest completed invocations, kept raw by every trigger; 0: none", ge=0
    ),
    "boundaries": PolicyField(
        (), "semantic boundaries that close a segment: " + ", ".join(BOUNDARY_KINDS)
    ),
    "topic_shift_threshold": PolicyField(
        0.2, "cosine similarity below which the topic shifted", ge=-1, le=1
    ),
}
POLICY_FIELDS: tuple[str, ...] = tuple(FIELDS)
SERVE_DEFAULTS: dict[str, Any] = {"token_threshold": 8000}


def default(name: str, serve: bool = False) -> Any:
    """The field's default in-process, or (``serve``) in ``mnemoray serve``'s settings."""
    if serve and name in SERVE_DEFAULTS:
        return SERVE_DEFAULTS[name]
    value = FIELDS[name].default
    return list(value) if isinstance(value, tuple) else value


def model_field(name: str, value: Any = ..., **extra: Any) -> Any:
    """A pydantic ``Field`` for policy field ``name`` with its bounds and description;
    ``value`` is the model's default (``...``: the in-process default)."""
    spec = FIELDS[name]
    given = default(name) if value is ... else value
    if isinstance(given, list):
        extra["default_factory"] = lambda: list(given)
    else:
        extra["default"] = given
    return Field(ge=spec.ge, le=spec.le, description=spec.description, **extra)


def renamed(
    exc: InvalidInput, where: str, cls: type[MnemorayError] = InvalidInput
) -> MnemorayError:
    """``exc`` from CompactionConfig as ``cls`` naming the key under ``where``
    (``CompactionConfig.keep_last`` -> ``compaction.keep_last``)."""
    key = (exc.field or "").removeprefix(CONFIG_PREFIX)
    return cls(exc.reason, field=f"{where}.{key}" if key else where)
