"""The headers an artifact's payload is served with: as a download, never as a page.

An artifact holds what users, tools and models wrote; served under the API's origin
with its stored type, an HTML or SVG artifact would run script there and read the
API with the browser's credentials. So every payload answers with

- ``X-Content-Type-Options: nosniff``: the browser takes the type as given;
- ``Content-Security-Policy: default-src 'none'; sandbox``: should a browser render
  it anyway, it gets an opaque origin, no script and no fetch;
- ``Content-Disposition``: ``inline`` only for the types a browser shows without
  running anything (raster images, plain text), ``attachment`` for everything else.

The stored type travels, url-quoted, in ``X-Artifact-Mime-Type`` (what the client
and the inspector read back); ``Content-Type`` is the type the browser acts on.
"""

from __future__ import annotations

import re
import string
from urllib.parse import quote

MIME_TYPE_HEADER = "X-Artifact-Mime-Type"
DOWNLOAD_TYPE = "application/octet-stream"
TEXT_TYPE = "text/plain; charset=utf-8"
# Shown in the tab: a browser decodes these as pixels, nothing in them executes. SVG is
# not here: it is a document that can carry script.
INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# Checked against each allowed type: a browser's own image and text viewers load
# nothing and run nothing, so they render under it.
CSP = "default-src 'none'; sandbox"
# Printable ASCII but '%' (the escape) stays as is in a header value; the rest (CR, LF,
# non-ASCII) is url-quoted, so a stored type never splits or corrupts the headers.
_HEADER_SAFE = "".join(c for c in string.printable if c not in "%\t\n\r\x0b\x0c")
_FALLBACK_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]")


def artifact_headers(name: str, mime_type: str) -> dict[str, str]:
    """Every header that decides how a browser treats artifact ``name`` stored as
    ``mime_type`` (``Content-Type`` included): the one rule of the artifacts route."""
    base = mime_type.split(";", 1)[0].strip().lower()
    if base in INLINE_IMAGES:
        content_type, disposition = base, "inline"
    elif base == "text/plain":
        # Stored text is UTF-8 (the store encodes str so); a stated charset could make
        # a browser decode it as something else.
        content_type, disposition = TEXT_TYPE, "inline"
    else:
        # Not the stored type: Content-Disposition is ignored where a response is loaded
        # as a subresource (<script src>, <object>, <embed>, a stylesheet, a worker) or
        # by a client that does not honour it, and there text/html, image/svg+xml or
        # text/javascript could still be parsed or run. application/octet-stream is
        # never rendered or executed by any of them.
        content_type, disposition = DOWNLOAD_TYPE, "attachment"
    return {
        "Content-Type": content_type,
        "Content-Disposition": f"{disposition}; {_filename_params(name)}",
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
        MIME_TYPE_HEADER: quote(mime_type, safe=_HEADER_SAFE, errors="replace"),
    }


def _filename_params(name: str) -> str:
    """RFC 6266: a plain-ASCII ``filename`` for old clients (no quote, backslash,
    control or non-ASCII character can end the quoted string or inject a header), and
    the exact name as ``filename*`` (RFC 8187, UTF-8, percent-encoded)."""
    fallback = _FALLBACK_UNSAFE.sub("_", name).strip(" .") or "artifact"
    return f"filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
