"""The error hierarchy: one root, the status by class, fields carried as data."""

from __future__ import annotations

import pickle

import pytest

from mnemoray.artifacts.store import ArtifactError, ArtifactNotFoundError
from mnemoray.backfill.archive import ArchiveError
from mnemoray.compiler import UnknownProcessorError
from mnemoray.compiler.template import TemplateError, render_template
from mnemoray.errors import (
    ConfigError,
    Conflict,
    Forbidden,
    InvalidInput,
    MnemorayError,
    NotFound,
    StoreCorrupt,
    StoreError,
    Unauthorized,
    Unavailable,
)
from mnemoray.http.auth import AuthConfigError, AuthError, NotAuthenticated, NotPermitted
from mnemoray.jobs.scheduled_backfill import LockHeld
from mnemoray.memory.records.filters import RecallFilters, RetrievalError
from mnemoray.memory.records.record import MemoryRecordError
from mnemoray.memory.store.index import VectorIndexError
from mnemoray.memory.store.manifest import read_manifest
from mnemoray.sessions.events import Event, EventError
from mnemoray.sessions.session import Session, SessionError
from mnemoray.sessions.types import (
    DuplicateEventError,
    SessionEndedError,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
)
from mnemoray.summarizers.errors import (
    ModelRequestError,
    ModelUnavailableError,
    PromptTooLongError,
    SummaryParseError,
)


@pytest.mark.parametrize(
    "cls, root, status",
    [
        (EventError, InvalidInput, 422),
        (SessionError, InvalidInput, 422),
        (ArchiveError, InvalidInput, 422),
        (ArtifactError, InvalidInput, 422),
        (MemoryRecordError, InvalidInput, 422),
        (VectorIndexError, InvalidInput, 422),
        (RetrievalError, InvalidInput, 422),
        (StoreError, InvalidInput, 422),
        (TemplateError, InvalidInput, 422),
        (PromptTooLongError, InvalidInput, 422),
        (AuthConfigError, ConfigError, 422),
        (SessionNotFoundError, NotFound, 404),
        (ArtifactNotFoundError, NotFound, 404),
        (UnknownProcessorError, NotFound, 404),
        (SessionExistsError, Conflict, 409),
        (StaleSessionError, Conflict, 409),
        (SessionEndedError, Conflict, 409),
        (DuplicateEventError, Conflict, 409),
        (LockHeld, Conflict, 409),
        (NotAuthenticated, Unauthorized, 401),
        (NotPermitted, Forbidden, 403),
        (ModelUnavailableError, Unavailable, 503),
        (ModelRequestError, Unavailable, 503),
    ],
)
def test_every_library_error_has_one_root_and_a_status(cls, root, status) -> None:
    assert issubclass(cls, root) and issubclass(cls, MnemorayError)
    assert cls.status == status


def test_old_builtin_bases_still_catch() -> None:
    # Callers that caught the builtin class before the re-rooting keep working.
    assert issubclass(SessionNotFoundError, KeyError)
    assert issubclass(ArtifactNotFoundError, KeyError)
    assert issubclass(UnknownProcessorError, KeyError)
    assert issubclass(DuplicateEventError, ValueError)
    assert issubclass(StaleSessionError, RuntimeError)
    assert issubclass(EventError, ValueError)
    assert issubclass(AuthError, MnemorayError)
    assert issubclass(NotAuthenticated, AuthError) and issubclass(NotPermitted, AuthError)


def test_corruption_and_parse_failures_are_not_public() -> None:
    assert StoreCorrupt.status == 500 and not StoreCorrupt.public
    assert not issubclass(StoreCorrupt, InvalidInput)
    assert not SummaryParseError.public
    # A model backend's failure keeps its 503 but not its message (it names the URL).
    assert not ModelRequestError.public and ModelRequestError.status == 503


def test_field_is_data_and_the_message_names_it() -> None:
    err = InvalidInput("must be >= 1", field="top_k")
    assert (str(err), err.field, err.reason) == ("top_k: must be >= 1", "top_k", "must be >= 1")
    nested = err.within("filters")
    assert type(nested) is InvalidInput and nested.field == "filters.top_k"
    assert str(nested) == "filters.top_k: must be >= 1"
    assert InvalidInput("bad", field="[2]").within("events").field == "events[2]"
    assert InvalidInput("no field").within("events[0]").field == "events[0]"


def test_nested_errors_carry_the_path() -> None:
    with pytest.raises(EventError) as ev:
        Event.from_dict({"author": "user", "role": "robot"})
    assert ev.value.field == "role"
    with pytest.raises(SessionError) as sess:
        Session.from_dict(
            {
                "app_name": "a",
                "user_id": "u",
                "session_id": "s",
                "events": [{"author": "user"}, {"author": "u", "role": "bot"}],
            }
        )
    assert sess.value.field == "events[1].role"
    assert str(sess.value).startswith("events[1].role: ")
    with pytest.raises(RetrievalError) as flt:
        RecallFilters.from_dict({"after": "yesterday"})
    assert flt.value.field == "filters.after"
    # Re-raised as another class: the path is kept, the class is the caller's.
    wrapped = SessionError.nested(EventError("missing", field="author"), "events[3]")
    assert type(wrapped) is SessionError and wrapped.field == "events[3].author"


def test_template_error_names_the_instruction_and_the_key() -> None:
    with pytest.raises(TemplateError) as info:
        render_template("Hi {user:name}", {})
    assert info.value.field == "instruction" and info.value.key == "user:name"
    assert info.value.within("agent").field == "agent.instruction"
    assert info.value.within("agent").key == "user:name"


def test_errors_survive_pickling_across_processes() -> None:
    # Ray ships a replica's exception to the caller; custom __init__s must not break it.
    for err in (
        SessionNotFoundError("a", "u", "s"),
        TemplateError("k", "missing"),
        ArchiveError("f.jsonl:3", "bad row"),
        InvalidInput("x", field="f"),
        ModelRequestError("down", status=502),
        NotPermitted("no", field="app_name"),
    ):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert back.field == err.field
    assert pickle.loads(pickle.dumps(ModelRequestError("down", status=502))).status == 502


def test_a_damaged_manifest_is_store_corrupt(tmp_path) -> None:
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(StoreCorrupt, match="manifest"):
        read_manifest(tmp_path)
