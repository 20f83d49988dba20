"""The memory inspector: a static page at ``/ui/`` over the JSON API.

``routes`` serves the page's files; ``browser`` and ``screenshots`` drive it in the
system's Chromium (tests marked ``browser``, ``make demo``'s screenshots).
"""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "take_screenshots": "mnemoray.ui.screenshots",
    "router": "mnemoray.ui.routes",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
