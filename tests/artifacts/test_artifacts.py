from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mnemoray.artifacts.files import FileArtifactStore
from mnemoray.artifacts.store import (
    Artifact,
    ArtifactError,
    ArtifactNotFoundError,
    ArtifactStore,
    InMemoryArtifactStore,
    format_handle,
    parse_handle,
)
from mnemoray.errors import ConfigError

APP, USER = "travel", "maya"


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "memory":
        return InMemoryArtifactStore()
    return FileArtifactStore(tmp_path / "artifacts")


def test_versions_count_up_and_latest_is_default(store: ArtifactStore) -> None:
    assert store.save(APP, USER, "s1", "report.csv", b"a,b\n1,2\n", "text/csv", "v0") == 0
    assert store.save(APP, USER, "s1", "report.csv", b"a,b\n3,4\n", "text/csv", "v1") == 1
    assert store.list_versions(APP, USER, "s1", "report.csv") == [0, 1]
    latest = store.load(APP, USER, "s1", "report.csv")
    assert (latest.version, latest.data, latest.summary) == (1, b"a,b\n3,4\n", "v1")
    first = store.load(APP, USER, "s1", "report.csv", version=0)
    assert (first.data, first.mime_type, first.session_id) == (b"a,b\n1,2\n", "text/csv", "s1")
    with pytest.raises(ArtifactNotFoundError, match="version 2"):
        store.load(APP, USER, "s1", "report.csv", version=2)


def test_text_payloads_round_trip_and_binary_text_is_a_clear_error(store: ArtifactStore) -> None:
    store.save(APP, USER, "s1", "notes.md", "héllo ✓")
    art = store.load(APP, USER, "s1", "notes.md")
    assert art.text() == "héllo ✓"
    assert art.mime_type.startswith("text/plain")
    store.save(APP, USER, "s1", "photo.png", b"\x89PNG\xff\xfe", "image/png")
    with pytest.raises(ArtifactError, match="binary"):
        store.load(APP, USER, "s1", "photo.png").text()


def test_session_names_are_private_to_their_session(store: ArtifactStore) -> None:
    store.save(APP, USER, "s1", "draft.txt", "one")
    assert store.list_names(APP, USER, "s2") == []
    with pytest.raises(ArtifactNotFoundError, match="draft.txt"):
        store.load(APP, USER, "s2", "draft.txt")


def test_user_scoped_names_are_shared_across_sessions_not_users(store: ArtifactStore) -> None:
    assert store.save(APP, USER, "s1", "user:profile.json", '{"diet": "vegetarian"}') == 0
    assert store.save(APP, USER, "s2", "user:profile.json", '{"diet": "vegan"}') == 1
    for session in ("s1", "s2", "s3"):
        art = store.load(APP, USER, session, "user:profile.json")
        assert art.version == 1 and art.text() == '{"diet": "vegan"}'
    assert store.load(APP, USER, "s3", "user:profile.json", 0).session_id == "s1"
    assert store.list_versions(APP, USER, "s9", "user:profile.json") == [0, 1]
    with pytest.raises(ArtifactNotFoundError):
        store.load(APP, "someone-else", "s1", "user:profile.json")
    assert store.list_names(APP, "someone-else", "s1") == []


def test_list_names_merges_session_and_user_names_sorted(store: ArtifactStore) -> None:
    store.save(APP, USER, "s1", "zeta.txt", "z")
    store.save(APP, USER, "s1", "alpha.txt", "a")
    store.save(APP, USER, "s1", "alpha.txt", "a2")
    store.save(APP, USER, "s2", "user:prefs", "p")
    store.save(APP, USER, "s2", "other-session.txt", "o")
    store.save("other-app", USER, "s1", "foreign.txt", "f")
    assert store.list_names(APP, USER, "s1") == ["alpha.txt", "user:prefs", "zeta.txt"]


def test_delete_removes_every_version(store: ArtifactStore) -> None:
    store.save(APP, USER, "s1", "log.txt", "1")
    store.save(APP, USER, "s1", "log.txt", "2")
    store.save(APP, USER, "s1", "keep.txt", "k")
    store.delete(APP, USER, "s1", "log.txt")
    assert store.list_names(APP, USER, "s1") == ["keep.txt"]
    assert store.list_versions(APP, USER, "s1", "log.txt") == []
    with pytest.raises(ArtifactNotFoundError):
        store.load(APP, USER, "s1", "log.txt")
    with pytest.raises(ArtifactNotFoundError):
        store.delete(APP, USER, "s1", "log.txt")
    assert store.save(APP, USER, "s1", "log.txt", "fresh") == 0


def test_handles_round_trip(store: ArtifactStore) -> None:
    version = store.save(APP, "maya@example.com", "s 1", "q1 report@final.csv", b"x")
    art = store.load(APP, "maya@example.com", "s 1", "q1 report@final.csv")
    assert art.handle == (
        f"artifact://travel/maya%40example.com/s%201/q1%20report%40final.csv@{version}"
    )
    assert parse_handle(art.handle) == (APP, "maya@example.com", "s 1", "q1 report@final.csv", 0)
    assert store.load_handle(art.handle) == art

    store.save(APP, USER, "s1", "user:cv.pdf", b"%PDF", "application/pdf")
    shared = store.load(APP, USER, "s2", "user:cv.pdf")
    assert shared.handle == "artifact://travel/maya/~/user%3Acv.pdf@0"
    assert store.load_handle(shared.handle).data == b"%PDF"


@pytest.mark.parametrize(
    "handle",
    [
        "travel/maya/s1/x@0",  # no scheme
        "artifact://travel/maya/x@0",  # a segment missing
        "artifact://travel/maya/s1/x",  # no version
        "artifact://travel/maya/s1/x@latest",  # version not a number
        "artifact://travel/maya/s1/x@-1",
        "artifact://travel/maya/s1/..@0",  # traversal
        "artifact://travel/maya/~/plain.txt@0",  # "~" only for user: names
        "artifact://travel/maya/s1/user%3Ax@0",  # user: names only under "~"
        "artifact:///maya/s1/x@0",  # empty app
    ],
)
def test_malformed_handles_are_rejected(handle: str) -> None:
    with pytest.raises(ArtifactError, match="malformed artifact handle"):
        parse_handle(handle)


def test_format_handle_validates() -> None:
    assert format_handle("a", "u", "s", "user:n", 3) == "artifact://a/u/~/user%3An@3"
    with pytest.raises(ArtifactError, match="version"):
        format_handle("a", "u", "s", "n", -1)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "../x",
        "/",
        "a/b",
        "..",
        ".",
        "a\\b",
        "nul\x00byte",
        "line\nbreak",
        "user:",
        "user:../x",
        7,
    ],
)
def test_bad_names_are_rejected(store: ArtifactStore, name: object) -> None:
    with pytest.raises(ArtifactError, match="name"):
        store.save(APP, USER, "s1", name, b"x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "field,args",
    [
        ("app_name", ("../etc", USER, "s1")),
        ("user_id", (APP, "", "s1")),
        ("session_id", (APP, USER, "a/b")),
        ("session_id", (APP, USER, "~")),  # reserved for user-scoped names
    ],
)
def test_bad_scopes_are_rejected(store: ArtifactStore, field: str, args: tuple) -> None:
    with pytest.raises(ArtifactError, match=field):
        store.save(*args, "x.txt", b"x")


def test_bad_payloads_are_rejected(store: ArtifactStore) -> None:
    with pytest.raises(ArtifactError, match="data"):
        store.save(APP, USER, "s1", "x", {"not": "bytes"})  # type: ignore[arg-type]
    with pytest.raises(ArtifactError, match="mime_type"):
        store.save(APP, USER, "s1", "x", b"x", mime_type="")
    assert store.list_names(APP, USER, "s1") == []


def test_concurrent_saves_get_distinct_versions(store: ArtifactStore) -> None:
    threads, per_thread = 8, 10
    got: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def work(t: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            v = store.save(APP, USER, "s1", "user:shared.log", f"{t}-{i}", summary=f"{t}-{i}")
            with lock:
                got.append(v)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    total = threads * per_thread
    assert sorted(got) == list(range(total))
    assert store.list_versions(APP, USER, "s1", "user:shared.log") == list(range(total))
    # Every version holds exactly what its writer saved.
    payloads = {store.load(APP, USER, "s1", "user:shared.log", v).text() for v in range(total)}
    assert payloads == {f"{t}-{i}" for t in range(threads) for i in range(per_thread)}
    for v in range(total):
        art = store.load(APP, USER, "s1", "user:shared.log", v)
        assert art.text() == art.summary


def test_file_store_survives_a_new_instance(tmp_path: Path) -> None:
    root = tmp_path / "arts"
    first = FileArtifactStore(root)
    first.save(APP, USER, "s1", "plan.md", "# Plan", "text/markdown", "the plan")
    first.save(APP, USER, "s1", "plan.md", "# Plan v2", "text/markdown", "the plan, v2")
    first.save(APP, USER, "s1", "user:prefs", "vegetarian")
    again = FileArtifactStore(root)
    art = again.load(APP, USER, "s1", "plan.md")
    assert isinstance(art, Artifact)
    assert (art.version, art.text(), art.mime_type, art.summary) == (
        1,
        "# Plan v2",
        "text/markdown",
        "the plan, v2",
    )
    assert again.list_names(APP, USER, "s1") == ["plan.md", "user:prefs"]
    assert again.save(APP, USER, "s1", "plan.md", "# Plan v3") == 2
    # Nothing but committed files is left behind (no temporaries).
    leftovers = [p.name for p in root.rglob(".tmp-*")]
    assert leftovers == []


def test_file_store_ignores_a_claimed_but_uncommitted_version(tmp_path: Path) -> None:
    store = FileArtifactStore(tmp_path)
    store.save(APP, USER, "s1", "doc", "v0")
    directory = next(p.parent for p in tmp_path.rglob("0000000000.json"))
    (directory / "0000000001.bin").write_bytes(b"")  # a writer died after claiming v1
    assert store.list_versions(APP, USER, "s1", "doc") == [0]
    assert store.load(APP, USER, "s1", "doc").text() == "v0"
    assert store.save(APP, USER, "s1", "doc", "v2") == 2
    assert store.list_versions(APP, USER, "s1", "doc") == [0, 2]


def test_not_found_error_message_is_readable(store: ArtifactStore) -> None:
    with pytest.raises(ArtifactNotFoundError) as info:
        store.load(APP, USER, "s1", "missing.txt")
    assert str(info.value).startswith("artifact not found: 'missing.txt'")
    assert isinstance(info.value, KeyError)


def test_describe_is_load_without_the_payload(store: ArtifactStore) -> None:
    store.save(APP, USER, "s1", "big.json", b"{}" * 5000, "application/json", "a big one")
    store.save(APP, USER, "s1", "big.json", b"[]", "application/json", "small now")
    art, info = (
        store.load(APP, USER, "s1", "big.json", 0),
        store.describe(APP, USER, "s1", "big.json", 0),
    )
    assert (info.handle, info.size, info.mime_type, info.summary, info.version) == (
        art.handle,
        10_000,
        "application/json",
        "a big one",
        0,
    )
    assert store.describe(APP, USER, "s1", "big.json").version == 1
    with pytest.raises(ArtifactNotFoundError):
        store.describe(APP, USER, "s1", "nope")


def test_the_file_store_describes_from_metadata_alone(tmp_path: Path) -> None:
    store = FileArtifactStore(tmp_path)
    store.save(APP, USER, "s1", "blob", b"x" * 1000)
    (payload,) = tmp_path.rglob("0000000000.bin")
    payload.unlink()  # describe must not need it; load does
    assert store.describe(APP, USER, "s1", "blob").size == 1000
    with pytest.raises(ArtifactNotFoundError):
        store.load(APP, USER, "s1", "blob")


def test_delete_version_removes_only_that_version(store: ArtifactStore) -> None:
    """Offload cleanup removes the one version it saved: a later version another writer
    saved under the same name (and a stored event points to) stays."""
    for text in ("v0", "v1", "v2"):
        store.save(APP, USER, "s1", "report.txt", text)
    store.delete_version(APP, USER, "s1", "report.txt", 1)
    assert store.list_versions(APP, USER, "s1", "report.txt") == [0, 2]
    with pytest.raises(ArtifactNotFoundError, match="version 1"):
        store.load(APP, USER, "s1", "report.txt", version=1)
    assert store.load(APP, USER, "s1", "report.txt").text() == "v2"
    with pytest.raises(ArtifactNotFoundError, match="version 1"):
        store.delete_version(APP, USER, "s1", "report.txt", 1)
    store.delete_version(APP, USER, "s1", "report.txt", 2)
    assert store.load(APP, USER, "s1", "report.txt").text() == "v0"
    assert store.save(APP, USER, "s1", "report.txt", "v3") == 1  # after the latest kept
    store.delete_version(APP, USER, "s1", "report.txt", 0)
    store.delete_version(APP, USER, "s1", "report.txt", 1)
    assert store.list_names(APP, USER, "s1") == []
    with pytest.raises(ArtifactNotFoundError):
        store.load(APP, USER, "s1", "report.txt")
    with pytest.raises(ArtifactError, match="version"):
        store.delete_version(APP, USER, "s1", "report.txt", -1)


def test_a_file_store_refuses_a_url_instead_of_making_a_folder_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^root: s3://b/a is not supported here") as raised:
        FileArtifactStore("s3://b/a")
    assert raised.value.field == "root" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad", ["a\\b", "a/b", "..", "é" * 60])
def test_erasing_ids_no_store_accepts_finds_nothing_to_remove(
    store: ArtifactStore, bad: str
) -> None:
    """An id the segment rule refuses (a session or user id may still hold it) never held
    artifacts: erasing it removes nothing and does not fail, so the erasure goes on."""
    store.save("app", "u", "s1", "keep.txt", "kept")
    assert store.delete_user("app", bad) == 0
    assert store.delete_session_artifacts("app", "u", bad) == 0
    assert store.delete_session_artifacts("app", bad, "s1") == 0
    assert store.load("app", "u", "s1", "keep.txt").text() == "kept"
