"""One recall, resolved once (mnemoray.memory.recall.request): the mode defaulted per app,
the filters parsed with the field of what is wrong, the one rule for embedding the query,
and every edge refusing the same bad recall with the same field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from mnemoray.cli.main import app as cli
from mnemoray.errors import InvalidInput
from mnemoray.http.app import build_api
from mnemoray.http.local_backend import LocalBackend as HttpBackend
from mnemoray.mcp.local import LocalBackend as McpBackend
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.recall.request import RecallRequest, resolve_recall
from mnemoray.memory.records.filters import RecallFilters
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.batch_recall import BatchRecall
from mnemoray.memory.service.json_ops import MemoryOps
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers.extractive import ExtractiveSummarizer
from tests.memory.store.test_compact import HashEmbedder

CONFIG = RetrievalConfig()
LOCAL = ("127.0.0.1", 50000)  # an open server answers loopback clients only
LOCAL_URL = "http://127.0.0.1:8765"


def _note(app: str, user: str, text: str) -> Memory:
    return Memory(app, user, "online", "fact", text, created_at=1000.0, event_time_end=1000.0)


def _service(root: Path, embedder: Any = None, **options: Any) -> MemoryService:
    return MemoryService(MemoryStore(root), embedder, ExtractiveSummarizer(), **options)


def _field(exc: pytest.ExceptionInfo[InvalidInput]) -> str | None:
    return exc.value.field


# -- resolving: the mode, the filters, the checks ------------------------------------------
def test_the_mode_defaults_to_the_apps_config_and_a_given_one_wins(tmp_path: Path) -> None:
    service = _service(tmp_path / "s", app_configs={"kw": RetrievalConfig(mode="keyword")})
    assert service.resolve("kw", "ana", "tulips").mode == "keyword"
    assert service.resolve("other", "ana", "tulips").mode == "hybrid"
    assert service.resolve("kw", "ana", "tulips", mode="dense").mode == "dense"
    assert service.resolve("kw", "ana", "tulips", mode="").mode == "keyword"  # "" is unset
    dense = RetrievalConfig(mode="dense")
    assert resolve_recall(dense, "app", "ana", "q").mode == "dense"


def test_the_request_holds_the_parsed_filters_and_options() -> None:
    req = resolve_recall(
        CONFIG,
        "app",
        "ana",
        "tulips",
        3,
        "keyword",
        {"kinds": "fact", "after": 10, "agent_name": "planner"},
        explain=True,
        now=5.0,
        shared=False,
        recalled=False,
    )
    assert req.filters == RecallFilters(kinds=("fact",), after=10.0, agent_name="planner")
    assert (req.top_k, req.explain, req.now, req.shared, req.recalled) == (
        3,
        True,
        5.0,
        False,
        False,
    )
    assert req.agent_name == "planner" and not req.app_wide
    assert resolve_recall(CONFIG, "app", None, "tulips").app_wide
    flt = RecallFilters(session_id="s1")
    assert resolve_recall(CONFIG, "app", "ana", "q", filters=flt).filters is flt  # taken as is
    with pytest.raises(AttributeError):  # frozen: resolved once, never changed on the way
        req.mode = "dense"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("args", "options", "field"),
    [
        (("app", "ana", "q"), {"mode": "fuzzy"}, "mode"),
        (("app", "ana", "q"), {"filters": {"kinds": ["nope"]}}, "filters.kinds"),
        (("app", "ana", "q"), {"filters": {"colour": "red"}}, "filters.colour"),
        (("app", "ana", "q"), {"filters": {"after": 20, "before": 10}}, "filters"),
        (("app", "ana", "q"), {"filters": {"after": "not a time"}}, "filters.after"),
        (("app", "ana", "q"), {"filters": ["session_id"]}, "filters"),
        (("app", "ana", "  "), {}, "query"),
        (("app", "", "q"), {}, "user_id"),
        (("", None, "q"), {}, "app_name"),
        (("app", "ana", "q"), {"top_k": 0}, "top_k"),
        (("app", "ana", "q"), {"top_k": True}, "top_k"),
        # Checked in the order the service always answered: mode before the filters,
        # the filters before the query, the query before the ids.
        (("app", "", " "), {"mode": "fuzzy", "filters": {"kinds": ["x"]}}, "mode"),
        (("app", "", " "), {"filters": {"kinds": ["x"]}}, "filters.kinds"),
        (("app", "", " "), {}, "query"),
    ],
)
def test_a_bad_recall_names_its_field(
    args: tuple[str, str | None, str], options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as exc:
        resolve_recall(CONFIG, *args, **options)
    assert _field(exc) == field


# -- the one rule: does the query need a vector? ---------------------------------------------
def _req(mode: str) -> RecallRequest:
    return resolve_recall(CONFIG, "app", "ana", "tulips", mode=mode)


def test_needs_vector_is_dense_signal_and_embedding_store_and_memories() -> None:
    asked: list[str] = []

    def has(answer: bool) -> Any:
        def ask() -> bool:
            asked.append("asked")
            return answer

        return ask

    for mode in ("hybrid", "dense"):
        assert _req(mode).needs_vector(embeds=True, has_memories=has(True))
        assert not _req(mode).needs_vector(embeds=True, has_memories=has(False))  # empty scope
    assert len(asked) == 4
    asked.clear()
    # Keyword mode, or a store without vectors: the scope is never even asked.
    assert not _req("keyword").needs_vector(embeds=True, has_memories=has(True))
    assert not _req("hybrid").needs_vector(embeds=False, has_memories=has(True))
    assert asked == []
    assert _req("dense").needs_vector(embeds=True, has_memories=True)  # a known answer


def test_the_service_supplies_the_store_and_the_scope(tmp_path: Path) -> None:
    service = _service(
        tmp_path / "e", HashEmbedder(), app_configs={"kw": RetrievalConfig(mode="keyword")}
    )
    service.add_memories([_note("app", "ana", "Ana likes tulips"), _note("kw", "ana", "tulips")])
    snap = service.snapshot()
    assert service.needs_vector(service.resolve("app", "ana", "tulips"), snap)
    assert service.needs_vector(service.resolve("app", "ana", "tulips", mode="dense"), snap)
    assert not service.needs_vector(service.resolve("app", "ana", "tulips", mode="keyword"), snap)
    assert not service.needs_vector(service.resolve("kw", "ana", "tulips"), snap)  # app default
    assert not service.needs_vector(service.resolve("app", "nobody", "tulips"), snap)  # empty scope
    assert service.needs_vector(service.resolve("app", None, "tulips"), snap)  # app-wide
    assert not service.needs_vector(service.resolve("empty", None, "tulips"), snap)
    # The public keyword form says the same.
    assert service.needs_query_vector("app", "ana", "tulips", None, snap)
    assert not service.needs_query_vector("app", "nobody", "tulips", None, snap)
    service.close()
    # A keyword-only store: never a vector, for any user or mode.
    kw = _service(tmp_path / "k")
    kw.add_memories([_note("app", "ana", "Ana likes tulips")])
    for mode in ("hybrid", "dense", "keyword"):
        assert not kw.needs_vector(kw.resolve("app", "ana", "tulips", mode=mode))
    kw.close()


def test_search_is_recall_of_the_resolved_request(tmp_path: Path) -> None:
    service = _service(tmp_path / "s", HashEmbedder())
    service.add_memories(
        [_note("app", "ana", "Ana likes tulips"), _note("app", "ana", "Ana rides a bike")]
    )
    for mode in (None, "dense", "keyword"):
        loose = service.search("app", "ana", "tulips", 2, {"kinds": ["fact"]}, mode)
        whole = service.recall(
            service.resolve("app", "ana", "tulips", 2, {"kinds": ["fact"]}, mode)
        )
        assert [(r.memory.memory_id, r.score) for r in loose] == [
            (r.memory.memory_id, r.score) for r in whole
        ]
    app_wide = service.recall(service.resolve("app", None, "tulips", 1))
    assert [r.memory.memory_id for r in app_wide] == [
        r.memory.memory_id for r in service.search_app("app", "tulips", 1)
    ]
    service.close()


def test_an_op_given_a_request_of_another_scope_refuses_it(tmp_path: Path) -> None:
    service = _service(tmp_path / "s")
    ops = MemoryOps(service)
    request = service.resolve("app", "ana", "tulips")
    with pytest.raises(ValueError, match="sent as one of"):
        ops.call("recall", "app", "bob", {"request": request})
    assert ops.call("recall", "app", "ana", {"request": request})["memories"] == []
    service.close()


# -- every edge refuses the same bad recall with the same field --------------------------------
@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "store"
    service = _service(root)
    service.add_memories([_note("app", "ana", "Ana likes tulips")])
    service.close()
    yield root


BAD = [
    # (what is wrong, the recall's filters and mode as JSON, the field every edge names)
    ("mode", {"mode": "fuzzy"}, "mode"),
    ("time range", {"filters": {"after": 20, "before": 10}}, "filters"),
]


@pytest.mark.parametrize(("what", "bad", "field"), BAD)
def test_every_edge_refuses_the_same_recall_with_the_same_field(
    store: Path, tmp_path: Path, what: str, bad: dict[str, Any], field: str
) -> None:
    filters, mode = bad.get("filters"), bad.get("mode")
    # The HTTP route (pydantic checks the mode's literal, the resolver the rest).
    http = HttpBackend.open(str(store), sessions_db=str(tmp_path / "s.db"))
    try:
        client = TestClient(build_api(http), client=LOCAL, base_url=LOCAL_URL)  # type: ignore[arg-type]
        body = {"app_name": "app", "user_id": "ana", "query": "tulips", **bad}
        resp = client.post("/v1/recall", json=body)
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["field"] == field
    finally:
        http.close()
    # The service, its JSON ops and the MCP server's backend.
    service = MemoryService.open(store, embedder=None)
    for call in (
        lambda: service.search("app", "ana", "tulips", 5, filters, mode),
        lambda: MemoryOps(service).call(
            "recall", "app", "ana", {"query": "tulips", "filters": filters, "mode": mode}
        ),
        lambda: McpBackend(service, tmp_path / "m.db", tmp_path / "a").recall(
            "app", "ana", "tulips", 5, filters, mode
        ),
    ):
        with pytest.raises(InvalidInput) as exc:
            call()
        assert _field(exc) == field, what
    # Batch recall: the line answers the error, named by its field.
    if mode is None:
        line = json.dumps({"qid": 1, "app_name": "app", "user_id": "ana", "query": "q", **bad})
        (answer,) = BatchRecall(service).answers([line])
        assert answer["error"].startswith(f"{field}: "), answer
    else:
        with pytest.raises(InvalidInput) as exc:
            BatchRecall(service, mode=mode)
        assert _field(exc) == field
    service.close()
    # The CLI: exit 2, the same field named.
    args = ["recall", "--store", str(store), "--app", "app", "--user", "ana", "tulips"]
    if mode is not None:
        args += ["--mode", mode]
    else:
        args += ["--after", "20", "--before", "10"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert field in result.output
