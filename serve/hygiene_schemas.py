"""Moved: the HTTP models live in
``mnemoray.schemas.hygiene`` (shared with the clients). This module
re-exports them for code written against the old path; import from ``mnemoray.schemas.hygiene``."""

from mnemoray.schemas.hygiene import *  # noqa: F403
