"""The system's Chromium, driven by Playwright (the screenshots and the browser tests).

No browser is downloaded: machines here have no internet, so Playwright is pointed at
Debian's ``chromium`` (``/usr/bin/chromium``) or at ``$MNEMORAY_CHROMIUM``. Each launch
is headless with a fresh profile (Playwright's own temporary user-data-dir, and a
non-persistent context per page), and with the flags that keep Chromium from reaching
out to the network on its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from mnemoray.errors import ConfigError

if TYPE_CHECKING:  # playwright is an extra (mnemoray[browser])
    from playwright.sync_api import Browser, Page, ViewportSize

CHROMIUM_ENV = "MNEMORAY_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
# --headless comes from launch(headless=True); the rest: no sandbox (containers, root),
# no GPU, and nothing Chromium would fetch by itself (updates, sync, QUIC probes).
FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}


class BrowserMissing(ConfigError):
    """Chromium or Playwright is not installed: the message says which and how to get it."""


def chromium_path() -> Path:
    """The Chromium to drive: ``$MNEMORAY_CHROMIUM``, else /usr/bin/chromium (or
    ``chromium`` on the PATH)."""
    configured = os.environ.get(CHROMIUM_ENV)
    if configured:
        path = Path(configured)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BrowserMissing(f"{configured} is not an executable file", field=CHROMIUM_ENV)
        return path
    path = Path(DEFAULT_CHROMIUM)
    if path.is_file() and os.access(path, os.X_OK):
        return path
    found = shutil.which("chromium")
    if found:
        return Path(found)
    raise BrowserMissing(
        f"no Chromium at {DEFAULT_CHROMIUM}: install Debian's package "
        f"(apt-get install chromium, or make test-browser) or set "
        f"{CHROMIUM_ENV}",
        field=CHROMIUM_ENV,
    )


def check_playwright() -> None:
    try:
        import playwright.sync_api

        del playwright  # only whether it imports matters here
    except ImportError as exc:
        raise BrowserMissing(
            "the Python package playwright is not installed: pip install 'mnemoray[browser]'",
            field="playwright",
        ) from exc


def missing_reason() -> str | None:
    """Why no browser can be driven here (None: one can): for a test's skip."""
    try:
        check_playwright()
        chromium_path()
    except BrowserMissing as exc:
        return str(exc)
    return None


@contextmanager
def open_browser() -> Iterator[Browser]:
    """A headless system Chromium for the block; closed (and its profile removed) after."""
    check_playwright()
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(executable), headless=True, args=list(FLAGS)
        )
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def new_page(browser: Browser) -> Iterator[Page]:
    """A page at 1280x800 in a fresh context (no cookies, no storage from another page)."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        yield context.new_page()
    finally:
        context.close()
