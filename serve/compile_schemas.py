"""Moved: the HTTP models live in
``mnemoray.schemas.compile`` (shared with the clients). This module
re-exports them for code written against the old path; import from ``mnemoray.schemas.compile``."""

from mnemoray.schemas.compile import *  # noqa: F403
