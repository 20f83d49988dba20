"""serve/ without Ray: API keys, request schemas, settings, the serving memory
(non-blocking reload, tenant-scoped operations, one-shard stores) and the
body-limit middleware."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from mnemoray.errors import InvalidInput, StoreError
from mnemoray.http.auth import (
    ENV_VAR,
    ApiKeys,
    AuthConfigError,
    AuthError,
    authenticate,
    bearer_token,
    is_loopback,
    load_api_keys,
)
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.json_ops import MemoryOps, decode_cursor, encode_cursor
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.layout import shard_of
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.reload import SnapshotReloader
from mnemoray.schemas.common import MAX_QUERY_CHARS
from mnemoray.schemas.compile import AgentIn
from mnemoray.schemas.memories import AddMemoriesRequest, RecallRequest
from mnemoray.schemas.sessions import AppendEventsRequest
from mnemoray.settings.serve import SettingsError, parse_settings, settings_from_env
from mnemoray.summarizers import ExtractiveSummarizer

KEY_A = "key-for-app-a-0123456789"
KEY_AB = "key-for-apps-a-and-b-0123"


# -- auth ----------------------------------------------------------------------------------
def test_keys_map_to_apps_and_are_stored_hashed() -> None:
    keys = ApiKeys.from_mapping({KEY_A: "a", KEY_AB: ["a", "b"]})
    assert keys.apps_for(KEY_A) == {"a"} and keys.apps_for(KEY_AB) == {"a", "b"}
    assert keys.apps_for("nope-nope-nope-nope") is None
    digests = keys.to_digests()
    assert KEY_A not in json.dumps(digests)  # only digests travel to replicas
    assert ApiKeys.from_digests(digests).apps_for(KEY_AB) == {"a", "b"}
    assert ApiKeys.none().open and not keys.open


@pytest.mark.parametrize(
    "raw, fragment",
    [
        (["not", "a", "dict"], "JSON object"),
        ({"short": "a"}, "at least 16"),
        ({"has space in the key!!": "a"}, "whitespace"),
        ({KEY_A: []}, "non-empty list"),
        ({KEY_A: ["a", 3]}, "non-empty list"),
    ],
)
def test_bad_key_config_is_refused(raw: object, fragment: str) -> None:
    with pytest.raises(AuthConfigError, match=fragment):
        ApiKeys.from_mapping(raw)


def test_keys_from_file_and_environment(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({KEY_A: "a"}))
    assert load_api_keys(path, env={}).apps_for(KEY_A) == {"a"}
    assert load_api_keys(None, env={ENV_VAR: json.dumps({KEY_AB: ["b"]})}).apps_for(KEY_AB) == {"b"}
    assert load_api_keys(None, env={ENV_VAR: str(path)}).apps_for(KEY_A) == {"a"}
    assert load_api_keys(None, env={}).open
    path.write_text("{oops")
    with pytest.raises(AuthConfigError, match="invalid JSON"):
        load_api_keys(path, env={})
    with pytest.raises(AuthConfigError, match="cannot read"):
        load_api_keys(tmp_path / "missing.json", env={})
    with pytest.raises(AuthConfigError, match=ENV_VAR):
        load_api_keys(None, env={ENV_VAR: "{bad json"})


def test_authenticate() -> None:
    keys = ApiKeys.from_mapping({KEY_A: "a", KEY_AB: ["a", "b"]})
    assert authenticate(keys, f"Bearer {KEY_A}", "10.0.0.5").apps == {"a"}
    assert authenticate(keys, f"bearer   {KEY_AB} ", None).apps == {"a", "b"}
    for header in (
        None,
        "",
        "Bearer",
        "Basic abc",
        "Token " + KEY_A,
        "Bearer not-a-configured-key-000",
    ):
        with pytest.raises(AuthError) as err:
            authenticate(keys, header, "127.0.0.1")
        assert err.value.status == 401
    principal = authenticate(keys, f"Bearer {KEY_A}", "127.0.0.1")
    principal.check("a")
    with pytest.raises(AuthError) as denied:
        principal.check("b")
    assert denied.value.status == 403 and "'b'" in denied.value.message


def test_open_server_answers_loopback_only() -> None:
    open_keys = ApiKeys.none()
    assert authenticate(open_keys, None, "127.0.0.1").apps is None
    assert authenticate(open_keys, "Bearer whatever", "::1").apps is None
    with pytest.raises(AuthError) as remote:
        authenticate(open_keys, None, "192.168.1.20")
    assert remote.value.status == 403
    assert (
        authenticate(open_keys, None, "192.168.1.20", allow_remote_without_keys=True).apps is None
    )
    assert is_loopback("127.0.0.2") and is_loopback("localhost") and not is_loopback(None)
    assert bearer_token("Bearer x") == "x" and bearer_token("x") is None


# -- schemas -------------------------------------------------------------------------------
def _loc(exc: ValidationError) -> str:
    return ".".join(str(p) for p in exc.errors()[0]["loc"])


@pytest.mark.parametrize(
    "body, field",
    [
        ({"user_id": "u", "query": "q"}, "app_name"),
        ({"app_name": "a", "user_id": "u", "query": ""}, "query"),
        ({"app_name": "a", "user_id": "u", "query": "x" * (MAX_QUERY_CHARS + 1)}, "query"),
        ({"app_name": "a", "user_id": "u", "query": "q", "top_k": 0}, "top_k"),
        ({"app_name": "a", "user_id": "u", "query": "q", "top_k": 101}, "top_k"),
        ({"app_name": "a", "user_id": "u", "query": "q", "extra": 1}, "extra"),
        ({"app_name": "a\x00", "user_id": "u", "query": "q"}, "app_name"),
        ({"app_name": "a" * 257, "user_id": "u", "query": "q"}, "app_name"),
        (
            {"app_name": "a", "user_id": "u", "query": "q", "filters": {"kinds": []}},
            "filters.kinds",
        ),
        (
            {"app_name": "a", "user_id": "u", "query": "q", "filters": {"colour": "red"}},
            "filters.colour",
        ),
    ],
)
def test_recall_request_limits(body: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        RecallRequest.model_validate(body)
    assert _loc(err.value) == field


def test_other_request_limits() -> None:
    ok = RecallRequest.model_validate({"app_name": "a", "user_id": "u", "query": "q"})
    assert ok.top_k == 5 and ok.filters is None
    with pytest.raises(ValidationError, match="exactly one"):
        AddMemoriesRequest.model_validate({"app_name": "a", "user_id": "u"})
    with pytest.raises(ValidationError, match="exactly one"):
        AddMemoriesRequest.model_validate(
            {"app_name": "a", "user_id": "u", "session": {}, "memories": [{"text": "t"}]}
        )
    with pytest.raises(ValidationError) as many:
        AddMemoriesRequest.model_validate(
            {"app_name": "a", "user_id": "u", "memories": [{"text": "t"}] * 257}
        )
    assert _loc(many.value) == "memories"
    with pytest.raises(ValidationError):
        AppendEventsRequest.model_validate({"app_name": "a", "user_id": "u", "events": []})
    with pytest.raises(ValidationError) as agent:
        AgentIn.model_validate({"name": "x", "preload_top_k": 0})
    assert _loc(agent.value) == "preload_top_k"


# -- settings ------------------------------------------------------------------------------
def test_settings_from_cli_strings_and_env(tmp_path: Path) -> None:
    s = parse_settings(
        {
            "store": str(tmp_path),
            "server": {"replicas": "2", "offload_search": "true"},
            "ingestion": {"trigger": {"type": "inactivity", "inactivity_s": "5"}},
        }
    )
    assert s.server.replicas == 2 and s.server.offload_search
    assert s.ingestion.trigger.config().inactivity_s == 5
    assert s.sessions_path == str(tmp_path / "sessions.db")
    with pytest.raises(SettingsError, match="server.replica: unknown setting"):
        parse_settings({"store": str(tmp_path), "server": {"replica": 2}})
    with pytest.raises(SettingsError, match="server.index_mode"):
        parse_settings({"store": str(tmp_path), "server": {"index_mode": "elsewhere"}})
    with pytest.raises(SettingsError, match="replicas: moved: use server.replicas"):
        parse_settings({"store": str(tmp_path), "replicas": 2})
    env = settings_from_env(
        {
            "MNEMORAY_STORE": str(tmp_path),
            "MNEMORAY_SERVER__REPLICAS": "3",
            "MNEMORAY_INGESTION__TRIGGER__TYPE": "message_count",
        }
    )
    assert parse_settings(env).server.replicas == 3
    assert env["ingestion"] == {"trigger": {"type": "message_count"}}


# -- the serving memory (keyword-only store: no model needed) -------------------------------
def _mem(user: str, text: str, app: str = "app", t: float = 1000.0) -> Memory:
    return Memory(app, user, "s1", "fact", text, created_at=t)


def _served(store: MemoryStore) -> MemoryOps:
    """The server's setup with its watcher not started: snapshots swap on refresh()."""
    reloader = SnapshotReloader(store.load, store.root, watch_interval_s=0.25)
    return MemoryOps(MemoryService(store, None, ExtractiveSummarizer(), reloader=reloader))


def test_reload_swaps_without_blocking_and_ops_are_tenant_scoped(tmp_path: Path) -> None:
    root = tmp_path / "store"
    writer = MemoryService(MemoryStore(root), None, ExtractiveSummarizer())
    writer.add_memories(
        [_mem("ana", f"Ana note {i} about tulips", t=1000.0 + i) for i in range(5)]
        + [_mem("bob", "Bob likes tulips too")]
    )
    served = _served(MemoryStore(root))
    before = served.service.snapshot()
    assert served.op_recall("app", "ana", "tulips", None, 10)["memories"]
    # Another writer commits: readers keep the old snapshot until a refresh swaps it.
    writer.add_memories([_mem("ana", "Ana's secret word is zebra")])
    assert served.service.snapshot() is before
    assert not served.op_recall("app", "ana", "zebra", None, 3)["memories"]
    reloader = served.service.reloader
    assert reloader.refresh() and reloader.reloads == 1
    assert served.op_recall("app", "ana", "zebra", None, 3)["memories"][0]["text"].endswith("zebra")
    assert not reloader.refresh()  # unchanged manifest: no reload

    page1 = served.op_list_memories("app", "ana", limit=4)
    page2 = served.op_list_memories("app", "ana", cursor=page1["next_cursor"], limit=4)
    ids = [m["memory_id"] for m in page1["memories"] + page2["memories"]]
    assert len(ids) == len(set(ids)) == 6 and page2["next_cursor"] is None
    assert decode_cursor(encode_cursor(1.5, "x")) == (1.5, "x")
    with pytest.raises(InvalidInput, match="cursor"):
        decode_cursor("%%%")

    bob_id = served.op_list_memories("app", "bob")["memories"][0]["memory_id"]
    assert served.op_forget_memory("app", "ana", bob_id) == 0  # not ana's: untouched
    assert served.op_forget_memory("app", "bob", bob_id) == 1  # visible right away
    assert served.op_recall("app", "bob", "tulips", None, 3)["memories"] == []
    assert served.op_forget_memory("app", "bob", bob_id) == 0
    assert served.op_forget_user("app", "ana") == 6
    assert served.op_stats()["tombstones"] >= 2
    with pytest.raises(ValueError, match="op"):
        served.call("drop_everything", "app", "ana")


def test_one_shard_store_serves_its_tenants(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = MemoryStore(root, shards=4)
    users = [f"user{i}" for i in range(40)]
    by_shard: dict[int, list[str]] = {}
    for u in users:
        by_shard.setdefault(shard_of("app", u, 4), []).append(u)
    MemoryService(store, None, ExtractiveSummarizer()).add_memories(
        [_mem(u, f"{u} enjoys sailing") for u in users]
    )
    shard, mine = next(iter(by_shard.items()))
    other = next(u for s, us in by_shard.items() if s != shard for u in us)
    served = _served(MemoryStore(root, load_shards=[shard]))
    snap = served.service.snapshot()
    assert all(not segs for s, segs in enumerate(snap.segments) if s != shard)
    assert served.op_recall("app", mine[0], "sailing", None, 3)["memories"]
    assert served.op_stats()["loaded_shards"] == [shard]
    assert served.op_recall("app", other, "sailing", None, 3)["memories"] == []
    # Writes still go to the right shard of the shared store.
    served.op_add_memories("app", mine[0], [{"text": "and kayaking", "session_id": "s2"}])
    assert served.op_recall("app", mine[0], "kayaking", None, 3)["memories"]
    with pytest.raises(StoreError, match="load_shards"):
        MemoryStore(root, load_shards=[-1])


def test_add_session_dict_checks_the_tenant(tmp_path: Path) -> None:
    served = _served(MemoryStore(tmp_path / "s"))
    raw = {
        "session_id": "s1",
        "events": [{"author": "user", "role": "user", "text": "I moved to Porto last spring."}],
    }
    out = served.op_add_session("app", "ana", raw)
    assert out["added"] > 0
    assert served.op_recall("app", "ana", "Porto", None, 2)["memories"]
    with pytest.raises(ValueError, match="session.user_id"):
        served.op_add_session("app", "ana", {**raw, "user_id": "bob"})
    with pytest.raises(ValueError, match=r"session\.events\[0\]"):
        served.op_add_session("app", "ana", {"session_id": "s2", "events": [{"text": "x"}]})


# -- the body-limit middleware -----------------------------------------------------------------
def test_body_limit_middleware() -> None:
    from mnemoray.http.metrics import Metrics, ServeMiddleware

    async def app(scope, receive, send):  # reads the whole body, then answers 200
        while True:
            message = await receive()
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    metrics = Metrics(lambda: {"rows": 3})
    mw = ServeMiddleware(app, metrics, max_body_bytes=10)

    def call(headers: list, chunks: list[bytes]) -> int:
        sent: list[dict] = []
        queue = [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks)
        ]

        async def receive():
            return queue.pop(0)

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/x", "headers": headers}
        try:
            asyncio.run(mw(scope, receive, send))
        except Exception as exc:  # the 413 raised while streaming (FastAPI answers it)
            return getattr(exc, "status_code", 500)
        return sent[0]["status"]

    assert call([(b"content-length", b"5")], [b"12345"]) == 200
    assert call([(b"content-length", b"11")], [b"x" * 11]) == 413
    assert call([(b"content-length", b"-1")], [b""]) == 400
    assert call([], [b"x" * 6, b"x" * 6]) == 413  # chunked, no length
    text = metrics.render().decode()
    assert 'route="unmatched"' in text and "mnemoray_index_rows 3.0" in text


def test_config_yaml_is_a_valid_serve_config() -> None:
    import yaml
    from ray.serve.schema import ServeDeploySchema

    config = Path(__file__).parents[2] / "mnemoray" / "serve" / "config.yaml"
    raw = yaml.safe_load(config.read_text())
    ServeDeploySchema.model_validate(raw)
    app = raw["applications"][0]
    assert app["import_path"] == "mnemoray.serve.app:build_app"
    assert parse_settings(app["args"]).server.index_mode == "ingress"
    assert raw["http_options"]["host"] == "127.0.0.1"


def test_cli_refuses_a_public_host_without_keys(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from mnemoray.cli.main import app

    monkeypatch.delenv(ENV_VAR, raising=False)
    result = CliRunner().invoke(app, ["serve", "--store", str(tmp_path), "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "--host needs API keys" in result.output
    bad = CliRunner().invoke(app, ["serve", "--store", str(tmp_path), "--set", "replica=2"])
    assert bad.exit_code == 2 and "replica" in bad.output


def test_metrics_scrape_answers_while_the_store_is_damaged() -> None:
    from mnemoray.errors import StoreCorrupt
    from mnemoray.http.metrics import Metrics

    def broken() -> dict:
        raise StoreCorrupt("manifest: /secret/path/manifest.json is not a valid manifest")

    text = Metrics(broken).render().decode()
    assert "mnemoray_store_readable 0.0" in text and "/secret/path" not in text
    healthy = Metrics(lambda: {"rows": 3, "version": 2}).render().decode()
    assert "mnemoray_store_readable 1.0" in healthy and "mnemoray_index_rows 3.0" in healthy
