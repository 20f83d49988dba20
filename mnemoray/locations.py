"""Where a store lives: a local path, never a URL that its opener cannot open.

A ``postgresql://host/db`` given where a file is expected would otherwise become a
file named ``postgresql:/host/db`` in the working directory, and the caller would
never learn that their database was not used. Every opener of a local store (session
database, job queue, artifact directory, memory store) passes its location through
:func:`local_location`, which refuses a URL-looking one, naming what it supports.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from urllib.parse import urlsplit

from mnemoray.errors import ConfigError

# ``scheme://...``, and ``scheme:/...`` (what ``Path`` makes of it, collapsing ``//``).
# Two letters at least: ``C:/x`` is a Windows drive, not a scheme.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):/")


def url_scheme(location: str | os.PathLike[str]) -> str | None:
    """The scheme of a URL-looking ``location``, lower-cased; None for a path."""
    found = _URL.match(os.fspath(location))
    return found.group(1).lower() if found else None


def shown(location: str | os.PathLike[str]) -> str:
    """``location`` fit for a message: a URL's credentials (``user:secret@``) and its
    query (``?password=...``) left out."""
    text = os.fspath(location)
    try:
        parts = urlsplit(text)
    except ValueError:  # an unbalanced IPv6 bracket: not a URL we can take apart
        return text
    if parts.query and url_scheme(text) is not None:  # a path may hold a "?" of its own
        text = text.split("?", 1)[0] + "?***"
    if "@" not in parts.netloc:
        return text
    return text.replace(parts.netloc, "***@" + parts.netloc.rpartition("@")[2], 1)


def local_location(
    location: str | os.PathLike[str],
    *,
    field: str,
    supported: str,
    schemes: Collection[str] = (),
) -> str:
    """``location`` as a string when it is a local path, or a ``scheme://...`` of the
    opener's own ``schemes`` (left for it to parse); any other URL-looking location is a
    :class:`ConfigError` naming ``field`` and what is ``supported``."""
    text = os.fspath(location)
    scheme = url_scheme(text)
    if scheme is None or (scheme in schemes and text[len(scheme) :].startswith("://")):
        return text
    raise ConfigError(f"{shown(text)} is not supported here; give {supported}", field=field)


__all__ = ["local_location", "shown", "url_scheme"]
