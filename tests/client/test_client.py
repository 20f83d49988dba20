"""The sync client against the real API (``build_api`` over a real MemoryService,
compiler and job queue, through Starlette's TestClient as the client's httpx.Client):
every route, answered with the server's own models, and the in-process error classes.
Retries: ``test_client_retry.py``; OpenAPI: ``test_client_openapi.py``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from mnemoray.client import ConflictAPIError, MnemorayClient
from mnemoray.compiler import AgentSpec, Callee
from mnemoray.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from mnemoray.schemas.compile import CompiledRequestOut
from mnemoray.schemas.hygiene import ForgetConfirmed, ForgetPreviewOut, MemoryVersions
from mnemoray.schemas.memories import (
    AddMemoriesResponse,
    MemoryOut,
    MemoryPage,
    RecalledMemory,
    RecallResponse,
)
from mnemoray.schemas.sessions import (
    AppendEventsResponse,
    EndSessionAccepted,
    EndSessionResponse,
    JobAccepted,
    JobOut,
    SessionInfoOut,
    SessionOut,
)
from mnemoray.sessions.events import user_message
from tests.support.client_fixtures import KEY, api  # noqa: F401  (api: a fixture)
from tests.support.factories import parrot


@pytest.fixture
def mr(api: FastAPI) -> Iterator[MnemorayClient]:  # noqa: F811
    with MnemorayClient(api_key=KEY, http=TestClient(api)) as client:
        yield client


def test_the_client_imports_without_ray_torch_or_the_server() -> None:
    code = (
        "import sys, mnemoray.client; heavy = {'ray', 'torch', 'fastapi', "
        "'faiss', 'pyarrow', 'polars', 'transformers', 'onnxruntime'}; "
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}) + "
        "[m for m in sys.modules if m.startswith('mnemoray.serve')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- every route, typed with the server's models --------------------------------------------------
def test_memories_add_recall_search_page_and_forget(mr: MnemorayClient) -> None:
    texts = [f"Ana's note {i}: she keeps parrot number {i}." for i in range(5)]
    added = mr.add_memories("app", "ana", texts)
    assert isinstance(added, AddMemoriesResponse) and added.added == 5
    assert all(isinstance(m, MemoryOut) for m in added.memories)
    again = mr.add_memories("app", "ana", texts[:2])  # content-addressed: safe to repeat
    assert (again.added, again.duplicates, again.status) == (0, 2, "unchanged")

    found = mr.recall("app", "ana", "parrot number 3", top_k=2, mode="keyword")
    assert isinstance(found, RecallResponse) and isinstance(found.memories[0], RecalledMemory)
    assert "parrot number 3" in found.memories[0].text
    searched = mr.search("app", "ana", "parrot number 3", top_k=2, mode="keyword", kinds=["fact"])
    assert [m.memory_id for m in searched.memories] == [m.memory_id for m in found.memories]

    first = mr.list_memories("app", "ana", limit=2)
    assert isinstance(first, MemoryPage) and len(first.memories) == 2 and first.next_cursor
    every = list(mr.iter_memories("app", "ana", page_size=2))
    ids = [m.memory_id for m in every]
    assert sorted(ids) == sorted(m.memory_id for m in added.memories) and len(set(ids)) == 5
    assert ids[:2] == [m.memory_id for m in first.memories]

    assert mr.forget_memory("app", "ana", ids[0], reason="user asked") == 1
    with pytest.raises(NotFound):
        mr.forget_memory("app", "ana", ids[0])
    records = mr.forgotten("app", "ana")
    assert [(r.memory_id, r.reason) for r in records] == [(ids[0], "user asked")]
    assert records[0].actor.startswith("key:")
    assert mr.forget_user("app", "ana", reason="account closed") == 4
    assert mr.list_memories("app", "ana").memories == []


def test_edit_versions_and_forget_by_query(mr: MnemorayClient) -> None:
    [mid] = [m.memory_id for m in mr.add_memories("app", "ana", ["I live in Madrid."]).memories]
    edited = mr.edit_memory("app", "ana", mid, "I live in Lisbon.", actor="ana")
    assert edited.replaced == mid and edited.memory.text == "I live in Lisbon."
    assert edited.memory.edited_by and edited.memory.edited_by.endswith("(ana)")
    versions = mr.memory_versions("app", "ana", mid)  # the old id still finds it
    assert isinstance(versions, MemoryVersions)
    assert [v.text for v in versions.versions] == ["I live in Madrid.", "I live in Lisbon."]
    assert versions.versions[-1].current and versions.memory_id == edited.memory.memory_id

    mr.add_memories("app", "ana", ["Ana's cat is called Miso.", "Ana drinks green tea."])
    preview = mr.preview_forget("app", "ana", "cat Miso", top_k=1, mode="keyword")
    assert isinstance(preview, ForgetPreviewOut) and preview.dry_run
    assert len(preview.memory_ids) == 1 and "Miso" in preview.memories[0].text
    assert len(mr.list_memories("app", "ana").memories) == 3  # a preview forgets nothing
    done = mr.confirm_forget("app", "ana", preview.confirm_token, reason="privacy")
    assert isinstance(done, ForgetConfirmed) and done.memory_ids == preview.memory_ids
    assert done.forgotten == 1
    assert "Miso" not in " ".join(m.text for m in mr.iter_memories("app", "ana"))
    assert mr.forgotten("app", "ana")[-1].reason == "privacy"
    with pytest.raises(InvalidInput) as bad:
        mr.confirm_forget("app", "ana", "not-a-token")
    assert bad.value.field == "confirm"


def test_sessions_compile_with_a_callee_and_artifacts(mr: MnemorayClient) -> None:
    created = mr.create_session(
        "app",
        "ana",
        "trip",
        state={"user:name": "Ana"},
        compaction={"token_threshold": 5_000, "keep_last": 4},
    )
    assert isinstance(created, SessionOut) and created.version == 1  # the policy event
    appended = mr.append_events(
        "app", "ana", "trip", [user_message("Plan my trip.")], expected_version=created.version
    )
    assert isinstance(appended, AppendEventsResponse) and appended.persisted == [True]
    assert mr.get_session("app", "ana", "trip").version == appended.version == 2
    [info] = mr.list_sessions("app", "ana")
    assert isinstance(info, SessionInfoOut) and info.session_id == "trip"
    with pytest.raises(ConflictAPIError):  # stale: the session moved on
        mr.append_events("app", "ana", "trip", [user_message("x")], expected_version=1)

    saved = mr.put_artifact("app", "ana", "trip", "notes.txt", "pack light", summary="tips")
    assert (saved.version, saved.handle) == (0, "artifact://app/ana/trip/notes.txt@0")
    got = mr.get_artifact("app", "ana", "trip", "notes.txt")
    assert (got.text(), got.summary, got.version) == ("pack light", "tips", 0)
    assert mr.artifact_versions("app", "ana", "trip", "notes.txt") == [0]
    assert mr.artifact_names("app", "ana", "trip") == ["notes.txt"]

    out = mr.compile(
        "app",
        "ana",
        "trip",
        AgentSpec(name="packer"),
        callee=Callee("What should I pack?", ("notes.txt",)),
    )
    assert isinstance(out, CompiledRequestOut) and out.contents[-1].text == "What should I pack?"
    assert "pack light" in out.contents[0].text and "Plan my trip." not in out.model_dump_json()
    assert out.total_tokens == sum(s.tokens_added for s in out.trace) and out.took_ms
    full = mr.compile(
        "app",
        "ana",
        "trip",
        {"name": "planner", "instruction": "Hi {user:name}", "memory_tools": ["load_artifacts"]},
        new_message="Which bag?",
    )
    assert "\n\nHi Ana\n" in full.system_instruction and "notes.txt" in full.system_instruction
    assert full.contents[-1].text == "Which bag?"


def test_jobs_queue_wait_and_retry(mr: MnemorayClient) -> None:
    session = parrot(user="ana", sid="s1")  # a Session object: sent as its dict
    queued = mr.add_session(session, wait=False)
    assert isinstance(queued, JobAccepted)
    job = mr.wait_for_job("app", "ana", queued.job_id, timeout_s=30)
    assert isinstance(job, JobOut) and job.status == "done" and job.memories_added > 0
    assert mr.add_session(session).status == "unchanged"  # the same content: nothing new
    with pytest.raises(ConflictAPIError):  # only a failed job is retried
        mr.retry_job("app", "ana", queued.job_id)
    with pytest.raises(NotFound):  # another user's job is nobody's
        mr.get_job("app", "bob", queued.job_id)

    mr.create_session("app", "ana", "s2")
    mr.append_events("app", "ana", "s2", [user_message("I moved to Porto last spring.")])
    ended = mr.end_session("app", "ana", "s2")
    assert isinstance(ended, EndSessionAccepted)
    assert mr.wait_for_job("app", "ana", ended.job_id, timeout_s=30).status == "done"
    again = mr.end_session("app", "ana", "s2", wait=True)
    assert isinstance(again, EndSessionResponse) and again.ingestion.status == "unchanged"


def test_errors_are_the_in_process_classes(api: FastAPI) -> None:  # noqa: F811
    with (
        MnemorayClient(api_key="wrong-key-0123456789", http=TestClient(api)) as stranger,
        pytest.raises(Unauthorized),
    ):
        stranger.list_sessions("app", "ana")
    with MnemorayClient(api_key=KEY, http=TestClient(api)) as mr:
        with pytest.raises(Forbidden):
            mr.recall("other-app", "ana", "q")
        with pytest.raises(InvalidInput) as bad:
            mr.recall("app", "ana", "q", top_k=0)
        with pytest.raises(NotFound):
            mr.get_session("app", "ana", "nope")
    assert bad.value.status == 422 and bad.value.field == "top_k" and bad.value.request_id
