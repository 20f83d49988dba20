"""Moved: the HTTP models live in ``mnemoray.schemas`` (shared with the clients). This
module re-exports them for code written against the old path; import from there."""

from mnemoray.schemas.common import *  # noqa: F403
from mnemoray.schemas.common import RequestModel as _Request  # noqa: F401
from mnemoray.schemas.compile import *  # noqa: F403
from mnemoray.schemas.memories import *  # noqa: F403
from mnemoray.schemas.sessions import *  # noqa: F403
