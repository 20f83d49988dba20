"""Serves the inspector's static files at ``/ui/`` from this package.

The files hold no data (every data call the page makes goes to the JSON API with
the caller's key), so they need no key: a browser must load the page before it can
ask for one. Only files under ``static/`` are served; anything else is a 404.
"""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse

from mnemoray.errors import NotFound

STATIC = (Path(__file__).parent / "static").resolve()
# Explicit types: the system's mimetypes table may lack .js (Python < 3.12 on some
# distributions) and a browser refuses an ES module served as text/plain.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}
HEADERS = {
    # The page changes with the package: a browser revalidates instead of running old code.
    "Cache-Control": "no-cache",
    # Only the page's own files run, and it talks only to this server: a memory whose
    # text looks like markup can never execute (the page also writes text nodes only)
    # and read the key kept in the tab; no other site may frame the page.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

# One path segment of a file under static/: what the package ships. Checked before the
# filesystem sees the path: a NUL, a control character or an over-long name would make
# os.stat raise (ValueError, OSError) instead of answering "no such file".
_SEGMENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")

router = APIRouter(tags=["ui"], include_in_schema=False)


def static_file(path: str) -> Path:
    """The file ``path`` names under ``static/``; NotFound for anything else
    (``..``, absolute paths, hidden files, folders, unknown types)."""
    parts = path.split("/")
    if not path or len(parts) > 8 or not all(_SEGMENT.fullmatch(p) for p in parts):
        raise NotFound(f"no such file: {path[:80]!r}", field="path")
    try:
        target = (STATIC / path).resolve()
        found = target.is_relative_to(STATIC) and target.is_file()
    except (OSError, ValueError):  # the filesystem refused the name: not a file we ship
        found = False
    if not found or target.suffix not in CONTENT_TYPES:
        raise NotFound(f"no such file: {path[:80]!r}", field="path")
    return target


def _file(target: Path) -> FileResponse:
    return FileResponse(target, media_type=CONTENT_TYPES[target.suffix], headers=HEADERS)


@router.get("/ui")
async def ui_root(request: Request) -> RedirectResponse:
    # Relative URLs in the page (app.js, style.css) resolve against /ui/; a deep
    # link's query string goes along.
    query = request.url.query
    return RedirectResponse("/ui/" + (f"?{query}" if query else ""), status_code=307)


@router.get("/ui/")
async def ui_index() -> FileResponse:
    return _file(static_file("index.html"))


@router.get("/ui/{path:path}")
async def ui_static(path: str) -> FileResponse:
    return _file(static_file(path))
