from __future__ import annotations

import copy

import pytest

from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.compiler import LOAD_ARTIFACTS_TOOL, AgentSpec, Compiler, Services
from mnemoray.sessions.events import model_message, tool_call, tool_result, user_message


@pytest.fixture
def store() -> InMemoryArtifactStore:
    store = InMemoryArtifactStore()
    store.save("app", "u1", "s1", "report.csv", "old", summary="old")
    store.save(
        "app",
        "u1",
        "s1",
        "report.csv",
        "region,revenue\nnorth,10\n",
        mime_type="text/csv",
        summary="Q3 revenue by region",
    )
    store.save(
        "app",
        "u1",
        "s1",
        "logo.png",
        b"\x89PNG\x00\xff",
        mime_type="image/png",
        summary="Company logo",
    )
    store.save("app", "u1", "other", "secret.txt", "not yours")
    return store


def load_step(names: list[str], author: str = "analyst") -> list:
    return [
        user_message("What was Q3 revenue in the north?"),
        tool_call(author, "load_artifacts", {"artifact_names": names}, call_id="L1"),
        tool_result(author, "load_artifacts", {"artifact_names": names}, call_id="L1"),
    ]


def compile_with(session, store, **kw):
    return Compiler.default().compile(
        session,
        AgentSpec(name="analyst", memory_tools=["load_artifacts"]),
        services=Services(artifacts=store),
        **kw,
    )


def test_lists_handles_and_summaries_and_offers_the_tool(make_session, store):
    req = compile_with(make_session(), store)
    assert (
        "- report.csv: artifact://app/u1/s1/report.csv@1 (text/csv, 24 bytes) - "
        "Q3 revenue by region"
    ) in req.system_instruction
    assert (
        "- logo.png: artifact://app/u1/s1/logo.png@0 (image/png, 6 bytes) - Company logo"
        in req.system_instruction
    )
    assert "secret.txt" not in req.system_instruction
    assert "north,10" not in req.system_instruction  # content is never listed
    assert req.tools == [LOAD_ARTIFACTS_TOOL]


def test_no_artifacts_no_listing_no_tool(make_session):
    req = compile_with(make_session(), InMemoryArtifactStore())
    assert "artifact" not in req.system_instruction.lower()
    assert req.tools == []


def test_loaded_artifact_is_inlined_for_the_next_call_only(make_session, store):
    session = make_session(*load_step(["report.csv", "logo.png", "missing.txt"]))
    before = copy.deepcopy(session.to_dict())
    req = compile_with(session, store, new_message="Also compare with Q2.")
    inline = req.contents[-2]
    assert inline.role == "user" and inline.event_ids == ()
    assert inline.parts[0].text == (
        "[Artifact report.csv (artifact://app/u1/s1/report.csv@1, "
        "text/csv)]:\nregion,revenue\nnorth,10\n"
    )
    assert "binary (image/png, 6 bytes)" in inline.parts[1].text
    assert "missing.txt could not be loaded" in inline.parts[2].text
    assert req.contents[-1].text == "Also compare with Q2."
    assert session.to_dict() == before  # nothing persisted
    step = next(s for s in req.trace if s.name == "artifacts")
    assert step.detail["inlined"] == ["report.csv", "logo.png", "missing.txt"]
    # Made for this call only: a prefix cache stops before it (the trace's last entry).
    ends = {"step": "artifacts", "part": "content", "index": len(req.contents) - 2}
    assert req.trace[-1].detail["ends_before"] == ends
    # Once the agent has answered, the content leaves the working context.
    session.apply(model_message("analyst", "North made 10."))
    after = compile_with(session, store)
    assert all("north,10" not in c.text for c in after.contents)


def test_handles_are_loaded_only_inside_this_users_scope(make_session, store):
    session = make_session(
        *load_step(["artifact://app/u1/s1/report.csv@0", "artifact://app/u1/other/secret.txt@0"])
    )
    req = compile_with(session, store)
    inline = req.contents[-1]
    assert inline.parts[0].text.endswith(":\nold")  # an explicit older version
    assert "not yours" not in inline.parts[1].text
    assert "another session or user" in inline.parts[1].text


def test_another_agents_load_is_not_inlined(make_session, store):
    session = make_session(*load_step(["report.csv"], author="someone_else"))
    req = compile_with(session, store)
    assert all("north,10" not in c.text for c in req.contents)
