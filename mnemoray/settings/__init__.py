"""Every settings group in one home, and the one loader that layers them (flags >
environment > file > defaults)."""

from mnemoray.settings.base import recall_settings
from mnemoray.settings.compaction import CompactionSettings
from mnemoray.settings.hygiene import HygieneSettings
from mnemoray.settings.serve import ServeSettings, SettingsError, load_settings, parse_settings

__all__ = [
    "CompactionSettings",
    "HygieneSettings",
    "ServeSettings",
    "SettingsError",
    "load_settings",
    "parse_settings",
    "recall_settings",
]
