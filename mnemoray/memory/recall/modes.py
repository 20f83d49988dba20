"""The recall modes, in a module that imports nothing heavy (the CLI lists them in help)."""

from __future__ import annotations

from typing import Literal, get_args

Mode = Literal["hybrid", "dense", "keyword"]
MODES: tuple[str, ...] = get_args(Mode)
