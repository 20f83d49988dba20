"""Every settings group in one home, and the one loader that layers them (flags >
environment > file > defaults)."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "CompactionSettings": "mnemoray.settings.compaction",
    "HygieneSettings": "mnemoray.settings.hygiene",
    "ServeSettings": "mnemoray.settings.serve",
    "SettingsError": "mnemoray.settings.serve",
    "load_settings": "mnemoray.settings.serve",
    "parse_settings": "mnemoray.settings.serve",
    "recall_settings": "mnemoray.settings.base",
    "scope_settings": "mnemoray.settings.scopes",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
