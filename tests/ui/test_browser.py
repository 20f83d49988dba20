"""The memory inspector (/ui/) in a real browser: the system's Chromium driven by
Playwright over the API served by uvicorn on a local store (``tests/ui_fixtures``),
no Ray. Skipped, with the reason, where Chromium or Playwright is missing. The page's
static routes (path check, content types) are tested without a browser."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlparse

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.http.errors import install_error_handlers
from mnemoray.http.local_backend import LocalBackend
from mnemoray.memory.store.runs import RunRecorder
from mnemoray.ui.browser import missing_reason, new_page, open_browser
from mnemoray.ui.routes import router as ui_router
from mnemoray.ui.screenshots import take_screenshots
from tests.support.ui_fixtures import (
    ANA,
    ANA_SESSION,
    APP,
    ARTIFACT,
    UiStore,
    build_ui_store,
    damage_shard_of,
)

MISSING = missing_reason()
browser_test = [
    pytest.mark.browser,
    pytest.mark.skipif(MISSING is not None, reason=f"no browser: {MISSING}"),
]
KEY = "inspector-test-key-0123456789"  # app_wide: lists users, reads the store report
USER_KEY = "inspector-user-key-0123456789"  # a user-facing agent's key: neither
# Every visible element with its own text: WCAG contrast of its colour against the first
# opaque background up its ancestors (white at the top); those under 4.5:1 come back.
CONTRAST_JS = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => { const f = (v) => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const bg = (el) => { for (; el; el = el.parentElement) {
    const c = rgb(getComputedStyle(el).backgroundColor);
    if (c.length === 3 || c[3] > 0) return c.slice(0, 3); } return [255, 255, 255]; };
  const low = [];
  for (const el of document.querySelectorAll("body *")) {
    if (el.closest("svg") || !el.getClientRects().length) continue;
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const what = el.textContent.trim().slice(0, 40);
    if (ratio < 4.5) low.push(`${el.tagName} ${ratio.toFixed(2)} ${what}`);
  }
  return low;
}"""
WAIT_MS = 30_000


# -- the server: the real local backend and store, uvicorn in a thread --------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, app: FastAPI) -> None:
        import uvicorn

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(
                app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def ui_store(tmp_path_factory: pytest.TempPathFactory) -> UiStore:
    out = build_ui_store(tmp_path_factory.mktemp("ui-store") / "store")
    # A batch run's report, written as a backfill writes it, for the health view's table
    # (the figures are the fixture's, not a measurement).
    run = RunRecorder(out.store, engine="local", config={}, kind="backfill")
    run.update(
        counts={"sessions_read": 3, "memories_written": 9},
        stage_seconds={"read": 0.25, "distill": 1.5, "embed": 0.75, "commit": 0.5},
    )
    run.finish("done")
    return out


@pytest.fixture(scope="module")
def backend(ui_store: UiStore) -> Iterator[LocalBackend]:
    b = LocalBackend.open(
        str(ui_store.store),
        sessions_db=str(ui_store.sessions_db),
        artifacts_dir=str(ui_store.artifacts_dir),
    )
    yield b
    b.close()


@pytest.fixture(scope="module")
def server(backend: LocalBackend) -> Iterator[Server]:
    with Server(build_api(backend)) as s:
        yield s


@pytest.fixture(scope="module")
def keyed_server(backend: LocalBackend) -> Iterator[Server]:
    keys = ApiKeys.from_mapping({KEY: {"apps": [APP], "app_wide": True}, USER_KEY: APP})
    with Server(build_api(backend, HttpConfig(keys=keys))) as s:
        yield s


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if MISSING:
        pytest.skip(f"no browser: {MISSING}")
    with open_browser() as b:
        yield b


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    with new_page(browser) as p:
        p.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        p.on("pageerror", lambda exc: errors.append(str(exc)))
        # What the Content-Security-Policy blocked would silently be missing from the page.
        p.on(
            "console",
            lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
        )
        yield p
        assert not errors, f"the page threw or was blocked: {errors}"


def ui(server: Server, **params: str) -> str:
    from urllib.parse import urlencode

    return f"{server.url}/ui/" + (f"?{urlencode(params)}" if params else "")


def query_of(page: Any) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


# -- static routes (no browser) --------------------------------------------------------------
@pytest.fixture(scope="module")
def static_client() -> TestClient:
    app = FastAPI()
    install_error_handlers(app)  # NotFound -> 404, as under build_api
    app.include_router(ui_router)
    return TestClient(app)


def test_static_files_served_with_types_and_no_cache(static_client: TestClient) -> None:
    for path, ctype in (
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/views/recall.js", "text/javascript"),
        ("/ui/style.css", "text/css"),
    ):
        r = static_client.get(path)
        assert r.status_code == 200, path
        assert r.headers["content-type"].startswith(ctype), path
        assert r.headers["cache-control"] == "no-cache"
        assert "default-src 'self'" in r.headers["content-security-policy"]
        assert r.headers["x-content-type-options"] == "nosniff"
    r = static_client.get("/ui?app_name=a&user_id=b", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui/?app_name=a&user_id=b"


@pytest.mark.parametrize(
    "path",
    [
        "/ui/../routes.py",
        "/ui/%2e%2e/routes.py",
        "/ui/..%2Froutes.py",
        "/ui/views/../../browser.py",
        "/ui/nope.js",
        "/ui/views",
        "/ui/.hidden",
        "/ui/%2Fetc/passwd",
        "/ui/..\\routes.py",
    ],
)
def test_static_path_check_refuses_everything_else(static_client: TestClient, path: str) -> None:
    assert static_client.get(path).status_code == 404


def test_static_files_need_no_key_but_data_does(keyed_server: Server) -> None:
    assert httpx.get(f"{keyed_server.url}/ui/").status_code == 200
    assert httpx.get(f"{keyed_server.url}/v1/apps").status_code == 401


# -- artifacts opened by their URL: downloads, or shown under a sandbox -----------------------
STOLEN = "stolen.json"
# What a planted artifact would do at the API's origin: read every tenant, write it back.
STEAL_JS = (
    "window.pwned = 1; document.title = 'pwned'; fetch('/v1/apps').then((r) => r.text())"
    f".then((t) => fetch('{STOLEN}', {{method: 'PUT', body: t}}));"
)


def _artifacts(server: Server) -> str:
    return f"{server.url}/v1/artifacts/{APP}/{ANA}/{ANA_SESSION}"


def _put_artifact(server: Server, name: str, data: bytes, mime: str) -> str:
    url = f"{_artifacts(server)}/{quote(name, safe='')}"
    r = httpx.put(url, content=data, headers={"Content-Type": mime})
    assert r.status_code == 201, r.text
    return url


def _png(width: int, height: int) -> bytes:
    """A valid RGB PNG, all red."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body)
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


# -- the page in Chromium ----------------------------------------------------------------------
class TestPage:
    pytestmark = browser_test

    def test_pick_the_user_and_see_the_parrot(self, server: Server, page: Any) -> None:
        page.goto(ui(server))
        page.get_by_test_id(f"pick-{APP}-{ANA}").click()
        cards = page.get_by_test_id("memory-card")
        cards.first.wait_for()
        assert "parrot" in " ".join(cards.all_inner_texts()).lower()
        assert query_of(page) == {"app_name": APP, "user_id": ANA}
        page.get_by_test_id("memories-plot").wait_for()
        # Provenance: the source events, loaded from the session, shown in context.
        parrot = cards.filter(has_text="adopted a parrot").first
        parrot.get_by_test_id("source-events-button").click()
        assert "Kiwi" in parrot.get_by_test_id("source-events").inner_text()
        # Its entities' typed facts and their validity, from the user's graph.
        parrot.get_by_test_id("entity-button").filter(has_text="Kiwi").first.click()
        assert "adopted Kiwi" in parrot.get_by_test_id("entity-facts").inner_text()

    def test_memories_filters_apply_server_side(self, server: Server, page: Any) -> None:
        page.goto(ui(server, app_name=APP, user_id=ANA))
        page.get_by_test_id("memory-card").first.wait_for()
        page.get_by_test_id("filter-session").select_option(ANA_SESSION)
        page.get_by_test_id("filter-apply").click()
        page.wait_for_url(lambda u: "filter_session" in u)
        page.locator("[data-testid=view][data-ready=memories]").wait_for()
        texts = " ".join(page.get_by_test_id("memory-text").all_inner_texts())
        assert "Kiwi" in texts and "Lisbon" not in texts

    def test_recall_shows_each_signal_side_by_side(self, server: Server, page: Any) -> None:
        page.goto(ui(server, app_name=APP, user_id=ANA, view="recall", q="parrot Kiwi"))
        rows = page.get_by_test_id("recall-row")
        rows.first.wait_for()
        assert "kiwi" in rows.first.inner_text().lower()
        assert page.get_by_test_id("signal-col-bm25").count() == 1
        # Each cell shows the signal's value and its rank; the keyword axis's best is
        # among the rows (the graph's asked fact may rank another first).
        cells = [c.inner_text() for c in page.get_by_test_id("signal-bm25").all()]
        assert " · #" in cells[0] and any(c.endswith(" · #1") for c in cells), cells
        # explain=true: what each signal added, plotted for the top result.
        plot = page.get_by_test_id("contribution-plot")
        plot.wait_for()
        assert "bm25" in plot.inner_html()

    def test_keyboard_tab_reaches_the_form_and_enter_submits(
        self, server: Server, page: Any
    ) -> None:
        page.goto(ui(server, app_name=APP, user_id=ANA, view="recall"))
        page.get_by_test_id("recall-form").wait_for()
        page.locator("body").focus()
        for _ in range(40):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.dataset.testid") == "recall-query":
                break
        else:
            pytest.fail("Tab never reached the query field")
        page.keyboard.type("sunflower seeds")
        page.keyboard.press("Enter")
        page.get_by_test_id("recall-row").first.wait_for()
        assert query_of(page)["q"] == "sunflower seeds"

    def test_session_timeline_state_compaction_artifacts(self, server: Server, page: Any) -> None:
        page.goto(ui(server, app_name=APP, user_id=ANA))
        page.get_by_test_id("nav-session").click()
        page.get_by_test_id("session-link").filter(has_text=ANA_SESSION).click()
        timeline = page.get_by_test_id("session-timeline")
        timeline.wait_for()
        assert query_of(page)["session_id"] == ANA_SESSION
        scopes = page.locator("[data-testid=session-state] [data-scope]")
        assert {scopes.nth(i).get_attribute("data-scope") for i in range(scopes.count())} >= {
            "user",
            "app",
            "session",
        }
        compaction = timeline.get_by_test_id("event-compaction").first
        compaction.get_by_test_id("compaction-toggle").click()
        assert compaction.get_by_test_id("compaction-raw").locator("li").count() >= 2
        artifact = page.get_by_test_id("artifact").filter(has_text=ARTIFACT)
        versions = artifact.get_by_test_id("artifact-version")
        assert versions.count() == 2
        versions.last.click()
        page.get_by_text("- apples").wait_for()

    def test_compile_trace_and_prefix_across_turns(
        self, server: Server, ui_store: UiStore, page: Any
    ) -> None:
        page.goto(ui(server, app_name=APP, user_id=ANA, view="compile", session_id=ANA_SESSION))
        tokens = page.get_by_test_id("trace-tokens")
        tokens.wait_for()
        for step in ("static_instruction", "history", "memory_preload", "token_budget"):
            assert step in tokens.inner_html()
        assert page.get_by_test_id("trace-time").count() == 1
        # The compiler's tools are opt-in: the inspector's agent ticks both.
        for tool in ("load_memory", "load_artifacts"):
            assert page.get_by_test_id(f"agent-tool-{tool}").is_checked()
        summary = page.get_by_test_id("compile-summary").inner_text()
        assert "load_memory, load_artifacts" in summary
        sections = page.locator("[data-testid=compiled-sections] [data-section]")
        assert [sections.nth(i).get_attribute("data-section") for i in range(sections.count())] == [
            "Static prefix (cacheable)",
            "Instruction",
            "Artifacts listing",
        ]
        # The memory block sits just before the new message (the default placement).
        kinds = page.locator("[data-testid=compiled-contents] tbody tr td:nth-child(3)")
        at = kinds.all_inner_texts().index("memory block")
        # The trace's last entry in words: the prefix ends at that block.
        summary = page.get_by_test_id("prefix-summary").inner_text()
        assert summary.startswith("A prefix cache can reuse ")
        assert summary.endswith(f"it ends before content {at + 1}, added by memory_preload.")
        assert "cacheable_prefix" in tokens.inner_html()
        turns = page.get_by_test_id("prefix-turns")
        turns.wait_for()
        assert turns.locator("tbody tr").count() == len(ui_store.user_turn_ids)
        assert "same at all" in page.get_by_test_id("prefix-verdict").inner_text()

    @pytest.mark.parametrize(
        "params,ready",
        [
            ({}, "[data-testid=memory-card]"),
            ({"view": "recall", "q": "Lisbon"}, "[data-testid=recall-row]"),
            ({"view": "session", "session_id": ANA_SESSION}, "[data-testid=session-timeline]"),
            ({"view": "compile", "session_id": ANA_SESSION}, "[data-testid=trace-tokens]"),
            ({"view": "health"}, "[data-testid=store-stats]"),
        ],
    )
    def test_deep_link_opens_the_view(
        self, server: Server, page: Any, params: dict[str, str], ready: str
    ) -> None:
        page.goto(ui(server, app_name=APP, user_id=ANA, **params))
        page.locator(ready).first.wait_for()
        current = page.locator("nav a[aria-current=page]")
        assert current.get_attribute("data-testid") == f"nav-{params.get('view', 'memories')}"

    def test_correct_then_forget_with_confirmation(self, server: Server, page: Any) -> None:
        added = httpx.post(
            f"{server.url}/v1/memories",
            json={
                "app_name": APP,
                "user_id": "throwaway",
                "memories": [{"text": "A red kite nests behind the barn.", "session_id": "kites"}],
            },
        )
        assert added.status_code == 201, added.text
        memory_id = added.json()["memories"][0]["memory_id"]
        page.goto(ui(server, app_name=APP, user_id="throwaway"))
        card = page.locator(f"[data-memory-id='{memory_id}']")
        card.get_by_test_id("correct-button").click()
        card.get_by_test_id("correct-text").fill("A red kite nests behind the old barn.")
        card.get_by_test_id("correct-save").click()
        card.get_by_test_id("correct-confirm").click()  # nothing changes before this
        page.get_by_text("behind the old barn").wait_for()
        card = page.get_by_test_id("memory-card").first
        card.get_by_test_id("forget-button").click()
        assert page.get_by_test_id("memory-card").count() == 1  # asks first
        card.get_by_test_id("forget-confirm").click()
        page.get_by_test_id("forgotten").wait_for()
        left = httpx.get(
            f"{server.url}/v1/memories", params={"app_name": APP, "user_id": "throwaway"}
        ).json()
        assert left["memories"] == []

    def test_keyed_server_asks_for_a_key_then_works(self, keyed_server: Server, page: Any) -> None:
        page.goto(ui(keyed_server, app_name=APP, user_id=ANA))
        dialog = page.get_by_test_id("key-dialog")
        dialog.wait_for()
        page.get_by_test_id("key-input").fill(KEY)
        page.get_by_test_id("key-submit").click()
        page.get_by_test_id("memory-card").first.wait_for()
        assert page.evaluate("sessionStorage.getItem('mnemoray.apiKey')") == KEY
        assert page.evaluate("localStorage.length") == 0  # in the tab only

    @pytest.mark.parametrize(
        "params",
        [
            {},
            {"view": "recall", "q": "parrot"},
            {"view": "session", "session_id": ANA_SESSION},
            {"view": "compile", "session_id": ANA_SESSION},
            {"view": "health"},
        ],
    )
    def test_contrast_and_fit_at_1280x800(
        self, server: Server, page: Any, params: dict[str, str]
    ) -> None:
        page.goto(ui(server, app_name=APP, user_id=ANA, **params))
        page.locator(f"[data-testid=view][data-ready={params.get('view', 'memories')}]").wait_for()
        low = page.evaluate(CONTRAST_JS)
        assert not low, f"text under 4.5:1 contrast: {low[:5]}"
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280  # no h-scroll

    def test_health_shows_stats_runs_and_doctor(self, server: Server, page: Any) -> None:
        page.goto(ui(server, view="health"))
        stats = page.get_by_test_id("store-stats")
        stats.wait_for()
        assert "Shards" in stats.inner_text() and "Segments" in stats.inner_text()
        assert "session_summary" in page.get_by_test_id("kinds-plot").inner_html()
        assert "healthy" in page.get_by_test_id("doctor").inner_text()
        run = page.get_by_test_id("run-row")
        assert run.count() == 1
        assert "backfill" in run.inner_text() and "distill" in run.locator("svg").inner_html()

    def test_user_key_types_the_user_and_is_refused_the_store(
        self, keyed_server: Server, page: Any
    ) -> None:
        page.goto(ui(keyed_server))
        page.get_by_test_id("key-input").fill(USER_KEY)
        page.get_by_test_id("key-input").press("Enter")
        picker = page.get_by_test_id("user-picker")
        picker.wait_for()
        assert "Type a user id" in picker.inner_text()  # this key lists no users
        page.get_by_test_id("user-input").fill(ANA)
        page.get_by_test_id("user-input").press("Enter")
        page.get_by_test_id("memory-card").first.wait_for()
        assert query_of(page) == {"app_name": APP, "user_id": ANA}
        page.get_by_test_id("nav-health").click()
        error = page.get_by_test_id("error")
        error.wait_for()
        assert error.inner_text().startswith("403")

    def test_markup_in_a_memory_is_shown_as_text_and_never_runs(
        self, server: Server, page: Any
    ) -> None:
        """A memory holds what users and tools wrote: markup in it is text. The page writes
        text nodes only, and its Content-Security-Policy would stop an inline script (the
        ``page`` fixture fails a test on any CSP violation, in every view)."""
        markup = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
        r = httpx.post(
            f"{server.url}/v1/memories",
            json={
                "app_name": APP,
                "user_id": "mallory",
                "memories": [{"text": f"My nickname is {markup}", "topics": ["<b>bold</b>"]}],
            },
        )
        assert r.status_code == 201, r.text
        page.goto(ui(server, app_name=APP, user_id="mallory"))
        card = page.get_by_test_id("memory-card").first
        card.wait_for()
        assert markup in card.inner_text() and "<b>bold</b>" in card.inner_text()
        page.goto(ui(server, app_name=APP, user_id="mallory", view="recall", q="nickname"))
        page.locator("[data-testid=recall-results], [data-testid=no-results]").first.wait_for()
        assert page.evaluate("window.pwned") is None
        assert page.locator("main img, main script").count() == 0  # the fixture: no CSP hit

    def test_a_damaged_shard_is_named_in_the_picker_and_the_health_view(
        self, tmp_path: Path, page: Any
    ) -> None:
        store = build_ui_store(tmp_path / "store")
        shard = damage_shard_of(store.store, ANA)
        backend = LocalBackend.open(str(store.store))
        try:
            with Server(build_api(backend)) as damaged:
                page.goto(ui(damaged))
                note = page.get_by_test_id("skipped-shards")
                note.wait_for()
                assert f"Shard(s) {shard}" in note.inner_text()
                page.goto(ui(damaged, app_name=APP, user_id=ANA, view="health"))
                partial = page.get_by_test_id("partial-stats")
                partial.wait_for()
                assert str(shard) in partial.inner_text()
                assert "problem" in page.get_by_test_id("doctor").inner_text()
        finally:
            backend.close()

    @pytest.mark.parametrize(
        "name,mime,payload",
        [
            ("report.html", "text/html", f"<html><body><script>{STEAL_JS}</script></body></html>"),
            (
                "user:logo.svg",
                "image/svg+xml",
                f'<svg xmlns="http://www.w3.org/2000/svg"><script>{STEAL_JS}</script></svg>',
            ),
        ],
    )
    def test_a_planted_artifact_is_downloaded_and_never_runs(
        self, server: Server, browser: Any, name: str, mime: str, payload: str
    ) -> None:
        """The attack: an artifact whose script reads /v1/apps (every tenant, on a server
        without keys) and writes it back as another artifact, opened by its URL."""
        from playwright.sync_api import Error as PlaywrightError

        url = _put_artifact(server, name, payload.encode(), mime)
        with new_page(browser) as p:
            p.set_default_timeout(WAIT_MS)
            # The navigation ends in a download: goto raises, the download is the answer.
            with p.expect_download() as download, contextlib.suppress(PlaywrightError):
                p.goto(url)
            # Chromium replaces the ':' of a user: name in the file it saves.
            assert download.value.suggested_filename == name.replace(":", "_")
            p.wait_for_timeout(500)  # time for a script that did run to call back
            assert p.title() != "pwned" and p.evaluate("window.pwned") is None
        assert httpx.get(f"{_artifacts(server)}/{STOLEN}").status_code == 404

    def test_plain_text_and_images_show_inline_under_the_sandbox(
        self, server: Server, browser: Any
    ) -> None:
        """The allowed inline types still render with the artifact CSP
        (``default-src 'none'; sandbox``), and markup in plain text stays text."""
        text_url = _put_artifact(
            server, "notes.txt", f"<script>{STEAL_JS}</script>".encode(), "text/plain"
        )
        png_url = _put_artifact(server, "dot.png", _png(3, 2), "image/png")
        with new_page(browser) as p:
            p.set_default_timeout(WAIT_MS)
            assert p.goto(text_url).headers["content-disposition"].startswith("inline")
            assert "fetch('/v1/apps')" in p.locator("body").inner_text()
            assert p.title() != "pwned" and p.evaluate("window.pwned") is None
            p.goto(png_url)
            size = p.locator("img").evaluate("(i) => [i.naturalWidth, i.naturalHeight]")
            assert size == [3, 2]
        assert httpx.get(f"{_artifacts(server)}/{STOLEN}").status_code == 404

    def test_api_errors_read_as_one_line(self, server: Server, page: Any) -> None:
        page.goto(ui(server, app_name=APP, user_id=ANA, view="session", session_id="nope"))
        error = page.get_by_test_id("error")
        error.wait_for()
        text = error.inner_text()
        assert text.startswith("404") and "\n" not in text


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


@pytest.mark.browser
@pytest.mark.skipif(MISSING is not None, reason=f"no browser: {MISSING}")
def test_screenshots_one_png_per_view(keyed_server: Server, tmp_path: Path) -> None:
    # Its own thread: this module's browser fixture holds Playwright's sync loop here.
    with ThreadPoolExecutor(1) as pool:
        paths = pool.submit(
            take_screenshots,
            keyed_server.url,
            tmp_path / "shots",
            APP,
            ANA,
            ANA_SESSION,
            "parrot",
            api_key=KEY,
        ).result(timeout=300)
    assert [p.name for p in paths] == [
        "memories.png",
        "recall.png",
        "session.png",
        "compile.png",
        "health.png",
    ]
    for p in paths:
        assert p.stat().st_size > 10_000, p
        assert _png_size(p) == (1280, 800)
