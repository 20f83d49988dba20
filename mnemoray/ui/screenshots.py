"""Screenshots of the inspector's views (``make demo``, the README): one PNG per view
at 1280x800, each taken once that view's data is on the page (no fixed sleep)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from mnemoray.errors import MnemorayError
from mnemoray.ui.browser import new_page, open_browser

KEY_ITEM = "mnemoray.apiKey"  # static/api.js keeps the tab's key under this name
TIMEOUT_MS = 60_000
ERROR = "[data-testid=error]:not([hidden])"


class ScreenshotFailed(MnemorayError):
    """A view showed an error (or never rendered) instead of its data."""


@dataclass(frozen=True)
class View:
    name: str
    params: dict[str, str]
    ready: str  # CSS selector present once the view's data has rendered


def views(app_name: str, user_id: str, session_id: str, query: str) -> list[View]:
    who = {"app_name": app_name, "user_id": user_id}
    return [
        View("memories", who, "[data-testid=memory-card], [data-testid=no-memories]"),
        View(
            "recall",
            {**who, "view": "recall", "q": query},
            "[data-testid=recall-results], [data-testid=no-results]",
        ),
        View(
            "session",
            {**who, "view": "session", "session_id": session_id},
            "[data-testid=session-timeline]",
        ),
        View(
            "compile",
            {**who, "view": "compile", "session_id": session_id},
            "[data-testid=prefix-turns], [data-testid=prefix-across-turns] .error",
        ),
        View("health", {**who, "view": "health"}, "[data-testid=store-stats]"),
    ]


def take_screenshots(
    base_url: str,
    out_dir: str | Path,
    app_name: str,
    user_id: str,
    session_id: str,
    query: str,
    api_key: str | None = None,
) -> list[Path]:
    """Open each view's deep link under ``base_url`` (the server, e.g.
    ``http://127.0.0.1:8765``) and write ``<out_dir>/<view>.png``; the paths, in order."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with open_browser() as browser:
        for view in views(app_name, user_id, session_id, query):
            with new_page(browser) as page:
                if api_key:  # as if typed into the key dialog: this tab's storage only
                    page.add_init_script(
                        f"sessionStorage.setItem({json.dumps(KEY_ITEM)}, {json.dumps(api_key)})"
                    )
                page.goto(f"{base_url.rstrip('/')}/ui/?{urlencode(view.params)}")
                page.wait_for_selector(f"{view.ready}, {ERROR}", timeout=TIMEOUT_MS)
                if page.locator(ERROR).count():
                    raise ScreenshotFailed(
                        f"the {view.name} view shows an error: {page.locator(ERROR).inner_text()}"
                    )
                path = out / f"{view.name}.png"
                page.screenshot(path=str(path))
                written.append(path)
    return written
