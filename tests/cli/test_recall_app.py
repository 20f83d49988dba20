"""App-wide recall over HTTP, the client and the CLI: every user of one app, for an
API key marked ``app_wide`` only (tenant isolation: any other key gets 403)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from mnemoray.cli.main import app as cli_app
from mnemoray.client import MnemorayAPIError, MnemorayClient
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys, AuthConfigError
from mnemoray.http.backend import HttpConfig
from mnemoray.memory.service.service import MemoryService
from tests.support.service_backend import ServiceBackend

USER_KEY = "recall-app-user-key-0123456789"  # app "app", user-facing
ADMIN_KEY = "recall-app-admin-key-0123456789"  # app "app", app-wide
OTHER_ADMIN = "recall-app-other-admin-012345"  # app "other", app-wide
KEYS = {
    USER_KEY: "app",
    ADMIN_KEY: {"apps": ["app"], "app_wide": True},
    OTHER_ADMIN: {"apps": ["other"], "app_wide": True},
}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def served(tmp_path: Path) -> tuple[TestClient, Path]:
    store = tmp_path / "store"
    service = MemoryService.open(store, embedder=None)
    api = build_api(
        ServiceBackend(service),  # type: ignore[arg-type]
        HttpConfig(keys=ApiKeys.from_mapping(KEYS)),
    )
    client = TestClient(api)
    for app_name, key, user, text in (
        ("app", USER_KEY, "ana", "My parrot Kiwi talks all day."),
        ("app", USER_KEY, "bob", "Our parrot eats sunflower seeds."),
        ("app", USER_KEY, "bob", "I run a half marathon in October."),
        ("other", OTHER_ADMIN, "carol", "My parrot is called Polly."),
    ):
        r = client.post(
            "/v1/memories",
            headers=auth(key),
            json={"app_name": app_name, "user_id": user, "memories": [{"text": text}]},
        )
        assert r.status_code == 201, r.text
    yield client, store
    service.close()


def test_an_app_wide_key_recalls_across_the_apps_users(served) -> None:
    client, _ = served
    r = client.post(
        "/v1/apps/app/recall", headers=auth(ADMIN_KEY), json={"query": "parrot", "top_k": 10}
    )
    assert r.status_code == 200, r.text
    got = {(m["user_id"], m["text"]) for m in r.json()["memories"]}
    # Both users of "app"; nothing of app "other" (carol's parrot) leaks in.
    assert got == {
        ("ana", "My parrot Kiwi talks all day."),
        ("bob", "Our parrot eats sunflower seeds."),
    }
    one = client.post(
        "/v1/apps/app/recall",
        headers=auth(ADMIN_KEY),
        json={"query": "parrot", "top_k": 1, "mode": "keyword"},
    )
    assert len(one.json()["memories"]) == 1


def test_other_keys_get_403_and_no_key_401(served) -> None:
    client, _ = served
    body = {"query": "parrot"}
    for key, why in ((USER_KEY, "app_wide"), (OTHER_ADMIN, "not allowed to use app")):
        r = client.post("/v1/apps/app/recall", headers=auth(key), json=body)
        assert r.status_code == 403, r.text
        assert why in r.json()["error"]["message"]
        assert "memories" not in r.json()
    assert client.post("/v1/apps/app/recall", json=body).status_code == 401
    # The user-facing key still recalls its own users one at a time.
    r = client.post(
        "/v1/recall",
        headers=auth(USER_KEY),
        json={"app_name": "app", "user_id": "ana", "query": "parrot"},
    )
    assert r.status_code == 200 and len(r.json()["memories"]) == 1
    bad = client.post(
        "/v1/apps/app/recall", headers=auth(ADMIN_KEY), json={"query": "parrot", "user_id": "ana"}
    )
    assert bad.status_code == 422  # no user scope here: unknown fields are refused


def test_the_client_calls_it_and_gets_403_as_an_error(served) -> None:
    client, _ = served
    admin = MnemorayClient(http=client, api_key=ADMIN_KEY)
    answer = admin.recall_app("app", "sunflower", top_k=3)
    assert [(m.user_id, m.text) for m in answer.memories] == [
        ("bob", "Our parrot eats sunflower seeds.")
    ]
    with pytest.raises(MnemorayAPIError) as err:
        MnemorayClient(http=client, api_key=USER_KEY).recall_app("app", "parrot")
    assert err.value.status == 403


def test_the_app_wide_flag_survives_the_trip_to_the_replicas() -> None:
    keys = ApiKeys.from_mapping(KEYS)
    again = ApiKeys.from_digests(keys.to_digests())
    assert again == keys
    assert again.is_app_wide(ADMIN_KEY) and not again.is_app_wide(USER_KEY)
    assert again.apps_for(OTHER_ADMIN) == {"other"}
    assert USER_KEY not in json.dumps(keys.to_digests())
    for bad in (
        {"apps": ["a"], "app_wide": "yes"},
        {"apps": ["a"], "admin": True},
        {"app_wide": True},
    ):
        with pytest.raises(AuthConfigError):
            ApiKeys.from_mapping({ADMIN_KEY: bad})


def test_the_cli_recalls_all_users_of_an_app(served) -> None:
    _, store = served
    runner = CliRunner()
    base = ["recall", "--store", str(store), "--embedder", "none", "--app", "app"]
    r = runner.invoke(cli_app, [*base, "--all-users", "--json", "parrot"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert {m["user_id"] for m in out["memories"]} == {"ana", "bob"}
    table = runner.invoke(cli_app, [*base, "--all-users", "marathon"])
    assert table.exit_code == 0 and "bob" in table.stdout and "marathon" in table.stdout
    both = runner.invoke(cli_app, [*base, "--all-users", "--user", "ana", "parrot"])
    assert both.exit_code == 2 and "--all-users" in both.output
    none = runner.invoke(
        cli_app,
        [
            "recall",
            "--store",
            str(store),
            "--embedder",
            "none",
            "--app",
            "no_such_app",
            "--all-users",
            "parrot",
        ],
    )
    assert none.exit_code == 1 and "no memories at all for app 'no_such_app'" in none.output


def test_an_index_replica_holding_some_shards_refuses_instead_of_missing_users(served) -> None:
    from mnemoray.errors import Unavailable
    from mnemoray.memory.service.json_ops import MemoryOps
    from mnemoray.memory.store.parquet.store import MemoryStore
    from mnemoray.summarizers import ExtractiveSummarizer

    _, store = served
    shard_ops = MemoryOps(
        MemoryService(MemoryStore(store, load_shards=[0]), None, ExtractiveSummarizer())
    )
    with pytest.raises(Unavailable, match="needs every shard"):
        shard_ops.call("recall_app", "app", "", {"query": "parrot"})
