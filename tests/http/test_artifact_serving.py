"""How artifact payloads are served: downloads unless a browser shows the type without
running anything, always ``nosniff`` and a sandboxing CSP; a ``user:`` artifact only
under ``~`` or a session of its user; the inspector's static route answers a 404 (not a
500) for a path the filesystem cannot take. The same in Chromium: tests/ui/test_browser.py."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from mnemoray.http.app import build_api
from mnemoray.http.artifact_headers import artifact_headers
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import ApiBackend, HttpConfig
from tests.http.test_routes import KEY, FakeBackend, client_over, error_of

BASE = "/v1/artifacts/app/ana/s1"
CSP = "default-src 'none'; sandbox"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@pytest.fixture
def backend() -> FakeBackend:
    b = FakeBackend()
    b.sessions.create_session("app", "ana", "s1")
    b.sessions.create_session("app", "bob", "b1")
    return b


@pytest.fixture
def client(backend: FakeBackend) -> TestClient:
    typed: ApiBackend = backend
    app = build_api(typed, HttpConfig(keys=ApiKeys.from_mapping({KEY: "app"})))
    return TestClient(
        app, headers={"Authorization": f"Bearer {KEY}"}, raise_server_exceptions=False
    )


def _put(client: TestClient, name: str, data: bytes, mime: str, session: str = "s1") -> None:
    r = client.put(
        f"/v1/artifacts/app/ana/{session}/{name}", content=data, headers={"Content-Type": mime}
    )
    assert r.status_code == 201, r.text


@pytest.mark.parametrize(
    "stored,served",
    [
        ("image/png", "image/png"),
        ("image/jpeg", "image/jpeg"),
        ("IMAGE/GIF", "image/gif"),
        ("image/webp; q=1", "image/webp"),
        ("text/plain", "text/plain; charset=utf-8"),
        ("text/plain; charset=iso-8859-1", "text/plain; charset=utf-8"),
    ],
)
def test_raster_images_and_plain_text_are_shown_inline(
    client: TestClient, stored: str, served: str
) -> None:
    _put(client, "shown", PNG, stored)
    r = client.get(BASE + "/shown")
    assert r.status_code == 200 and r.content == PNG
    assert r.headers["content-type"] == served
    assert r.headers["content-disposition"].startswith("inline; ")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-security-policy"] == CSP
    assert r.headers["x-artifact-mime-type"] == stored


@pytest.mark.parametrize(
    "stored",
    [
        "text/html",
        "text/html; charset=utf-8",
        "image/svg+xml",
        "application/xhtml+xml",
        "text/xml",
        "application/xml",
        "text/javascript",
        "application/javascript",
        "text/css",
        "text/markdown",
        "application/json",
        "application/pdf",
        "application/octet-stream",
        "multipart/x-mixed-replace; boundary=x",
        "nonsense",
    ],
)
def test_everything_else_is_an_opaque_download(client: TestClient, stored: str) -> None:
    payload = b"<html><script>fetch('/v1/apps')</script></html>"
    _put(client, "page.html", payload, stored)
    r = client.get(BASE + "/page.html")
    assert r.status_code == 200 and r.content == payload
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-disposition"] == (
        "attachment; filename=\"page.html\"; filename*=UTF-8''page.html"
    )
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-security-policy"] == CSP


def test_the_stored_type_comes_back_to_the_client(client: TestClient) -> None:
    _put(client, "report.csv", b"a,b\n", "text/csv; header=present")
    _put(client, "note.txt", b"hi", "text/plain")
    with client_over(client) as mr:
        assert mr.get_artifact("app", "ana", "s1", "report.csv").mime_type == (
            "text/csv; header=present"
        )
        assert mr.get_artifact("app", "ana", "s1", "note.txt").mime_type == "text/plain"


@pytest.mark.parametrize(
    "name,fallback",
    [
        ("notes.txt", "notes.txt"),
        ("user:cv.pdf", "user_cv.pdf"),
        ('a"b\\c;d.html', "a_b_c_d.html"),
        ("résumé €.pdf", "r_sum_ _.pdf"),
        ("日本", "__"),
        ("...", "artifact"),
    ],
)
def test_the_filename_is_ascii_quoted_with_the_exact_name_as_filename_star(
    name: str, fallback: str
) -> None:
    disposition = artifact_headers(name, "application/pdf")["Content-Disposition"]
    assert disposition == (
        f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
    )
    assert disposition.isascii() and "\r" not in disposition and "\n" not in disposition


def test_a_hostile_stored_type_cannot_split_the_headers() -> None:
    headers = artifact_headers("x", "text/html\r\nSet-Cookie: a=b\u00e9\ud800")
    assert all(v.isascii() and "\r" not in v and "\n" not in v for v in headers.values())
    assert headers["Content-Type"] == "application/octet-stream"


def test_a_user_artifact_answers_under_tilde_or_its_users_sessions_only(
    client: TestClient, backend: FakeBackend
) -> None:
    _put(client, "user:prefs.txt", b"vegetarian", "text/plain")
    assert client.get("/v1/artifacts/app/ana/~/user:prefs.txt").content == b"vegetarian"
    assert client.get(BASE + "/user:prefs.txt").content == b"vegetarian"  # ana's session
    assert client.get(BASE + "/user:prefs.txt/versions").json()["versions"] == [0]
    # A made-up session, another user's session: nothing, and the same answer as for an
    # artifact that does not exist (the segment is refused before the store is read).
    for segment in ("guess", "b1", "s1x"):
        for path in ("/user:prefs.txt", "/user:prefs.txt/versions", "/user:nope"):
            err = error_of(client.get(f"/v1/artifacts/app/ana/{segment}{path}"), 404)
            assert err["field"] == "session_id"
    # Bob has no such artifact, whatever the segment.
    assert error_of(client.get("/v1/artifacts/app/bob/b1/user:prefs.txt"), 404)
    # Session artifacts keep their own rule: only where they were saved.
    _put(client, "plan.md", b"# plan", "text/markdown")
    assert error_of(client.get("/v1/artifacts/app/ana/guess/plan.md"), 404)["field"] is None
    # A later session of the user reads it too.
    backend.sessions.create_session("app", "ana", "s2")
    assert client.get("/v1/artifacts/app/ana/s2/user:prefs.txt").status_code == 200


def test_saving_a_user_artifact_keeps_the_stores_rule(client: TestClient) -> None:
    """A client may save one before it creates the session (``tests/serve`` does)."""
    _put(client, "user:profile", b"likes parrots", "text/plain", session="not-yet")
    assert client.get("/v1/artifacts/app/ana/~/user:profile").content == b"likes parrots"


@pytest.mark.parametrize(
    "path",
    ["/ui/%00", "/ui/a%00.js", "/ui/views/%00", "/ui/%01x", "/ui/%ff", "/ui/" + "a" * 5000],
)
def test_ui_path_the_filesystem_cannot_take_is_a_404_not_a_500(
    client: TestClient, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        r = client.get(path)
    err: dict[str, Any] = error_of(r, 404)
    assert err["field"] == "path" and "\n" not in err["message"] and len(err["message"]) < 200
    assert not [rec for rec in caplog.records if rec.exc_info or rec.levelno >= logging.ERROR]


def test_the_hostile_artifact_and_ui_requests_answer_4xx_or_safely(client: TestClient) -> None:
    """``benchmarks.hostile_requests.artifact_cases`` (also sent to the Ray app by
    tests/serve): no 5xx; a read is a 404 or a download; inspector paths are 404s."""
    from benchmarks.hostile_requests import artifact_cases

    answers = {}
    for case in artifact_cases("app", "ana", "s1"):
        r = client.request(
            case.method, case.path, content=case.body, params=case.params, headers=case.headers
        )
        answers[case.name] = r
        assert r.status_code < 500, (case.name, r.status_code, r.text[:200])
        if case.method == "GET" and r.status_code == 200:
            shown = r.headers["content-type"] == "text/plain; charset=utf-8"  # the text case
            assert shown or r.headers["content-type"] == "application/octet-stream", case.name
            assert r.headers["content-disposition"].startswith("attachment; ") != shown
            assert r.headers["x-content-type-options"] == "nosniff", case.name
            assert r.headers["content-security-policy"] == CSP, case.name
        if case.path.startswith("/ui/"):
            assert r.status_code == 404, case.name
    assert answers["GET user artifact under a guessed session"].status_code == 404
    assert answers["GET artifact saved as html"].status_code == 200
