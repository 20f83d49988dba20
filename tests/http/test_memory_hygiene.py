"""Memory hygiene over HTTP (routes over a real MemoryService, no Ray) and the CLI:
PATCH + versions, forget reasons, forget by query with preview and confirm; every
route scoped to the caller's (app, user), 404 for another user's memory."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from mnemoray.cli.main import app as cli_app
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys, key_digest
from mnemoray.http.backend import HttpConfig
from mnemoray.http.memory import attach_webhook
from mnemoray.memory.service.service import MemoryService
from mnemoray.settings.serve import SettingsError, parse_settings
from tests.support.factories import parrot
from tests.support.service_backend import ServiceBackend

KEY = "hygiene-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
ANA = {"app_name": "app", "user_id": "ana"}
BOB = {"app_name": "app", "user_id": "bob"}
ACTOR = f"key:{key_digest(KEY)[:12]}"


@pytest.fixture
def service(tmp_path) -> MemoryService:
    svc = MemoryService.open(tmp_path / "store", embedder=None)
    yield svc
    svc.close()


@pytest.fixture
def client(service) -> TestClient:
    api = build_api(
        ServiceBackend(service),  # type: ignore[arg-type]
        HttpConfig(keys=ApiKeys.from_mapping({KEY: "app"})),
    )
    return TestClient(api, headers=AUTH)


def add(client: TestClient, who: dict, *texts: str) -> list[str]:
    r = client.post("/v1/memories", json={**who, "memories": [{"text": t} for t in texts]})
    assert r.status_code == 201, r.text
    return [m["memory_id"] for m in r.json()["memories"]]


def error(r, status: int) -> dict:
    assert r.status_code == status, r.text
    return r.json()["error"]


def test_patch_corrects_keeps_versions_and_records_the_caller(client) -> None:
    [mid] = add(client, ANA, "I live in Madrid.")
    [bobs] = add(client, BOB, "I live in Madrid.")
    r = client.patch(
        f"/v1/memories/{mid}", json={**ANA, "text": "I live in Lisbon.", "actor": "ana"}
    )
    assert r.status_code == 200, r.text
    out = r.json()
    new = out["memory"]
    assert out["replaced"] == mid and new["memory_id"] != mid
    assert new["text"] == "I live in Lisbon." and new["edited_by"] == f"{ACTOR} (ana)"
    assert [v["text"] for v in new["previous_versions"]] == ["I live in Madrid."]
    page = client.get("/v1/memories", params=ANA).json()["memories"]
    assert [(m["memory_id"], m["text"]) for m in page] == [(new["memory_id"], "I live in Lisbon.")]
    assert page[0]["previous_versions"][0]["memory_id"] == mid
    versions = client.get(f"/v1/memories/{mid}/versions", params=ANA).json()
    assert versions["memory_id"] == new["memory_id"]
    assert [(v["text"], v["current"]) for v in versions["versions"]] == [
        ("I live in Madrid.", False),
        ("I live in Lisbon.", True),
    ]
    hits = client.post("/v1/recall", json={**ANA, "query": "Lisbon"}).json()["memories"]
    assert [h["memory_id"] for h in hits] == [new["memory_id"]]
    # Another tenant's memory: 404, nothing about it leaks, nothing changes.
    for who, target in ((ANA, bobs), (BOB, mid)):
        assert (
            error(client.patch(f"/v1/memories/{target}", json={**who, "text": "x"}), 404)["field"]
            == "memory_id"
        )
        assert error(client.get(f"/v1/memories/{target}/versions", params=who), 404)
    assert (
        client.get("/v1/memories", params=BOB).json()["memories"][0]["text"] == "I live in Madrid."
    )
    assert (
        error(client.patch(f"/v1/memories/{mid}", json={**ANA, "text": ""}), 422)["field"] == "text"
    )
    assert error(
        client.patch(
            f"/v1/memories/{mid}", json={"app_name": "other", "user_id": "ana", "text": "x"}
        ),
        403,
    )


def test_delete_keeps_the_reason_and_who(client) -> None:
    ids = add(client, ANA, "My passport number is X123.", "I like tea.")
    r = client.delete(f"/v1/memories/{ids[0]}", params={**ANA, "reason": "sensitive"})
    assert r.status_code == 200 and r.json() == {"forgotten": 1}
    assert error(client.delete(f"/v1/memories/{ids[1]}", params=BOB), 404)
    assert (
        error(client.delete(f"/v1/memories/{ids[1]}", params={**ANA, "reason": "x" * 501}), 422)[
            "field"
        ]
        == "reason"
    )
    [record] = client.get("/v1/memories/forgotten", params=ANA).json()["records"]
    assert (record["memory_id"], record["reason"], record["actor"], record["scope"]) == (
        ids[0],
        "sensitive",
        ACTOR,
        "memory",
    )
    assert client.get("/v1/memories/forgotten", params=BOB).json() == {"records": []}


def test_forget_by_query_preview_then_confirm_exactly_that(client) -> None:
    add(
        client,
        ANA,
        "I said my parrot is called Rio.",
        "The parrot cage is by the window.",
        "I cook pasta on Sundays.",
    )
    add(client, BOB, "My parrot is called Kiwi.")
    r = client.post(
        "/v1/memories:forget", json={**ANA, "query": "parrot", "dry_run": True, "mode": "keyword"}
    )
    assert r.status_code == 200, r.text
    preview = r.json()
    assert preview["dry_run"] and len(preview["memory_ids"]) == 2
    assert all("parrot" in m["text"] for m in preview["memories"])
    assert len(client.get("/v1/memories", params=ANA).json()["memories"]) == 3  # nothing gone
    [late] = add(client, ANA, "Another parrot note.")
    token = preview["confirm_token"]
    assert (
        error(client.post("/v1/memories:forget", json={**BOB, "confirm": token}), 422)["field"]
        == "confirm"
    )
    assert error(client.post("/v1/memories:forget", json={**ANA}), 422)["field"] == "confirm"
    assert (
        error(client.post("/v1/memories:forget", json={**ANA, "dry_run": True}), 422)["field"]
        == "query"
    )
    done = client.post(
        "/v1/memories:forget", json={**ANA, "confirm": token, "reason": "user asked"}
    )
    assert done.status_code == 200, done.text
    assert done.json() == {"forgotten": 2, "memory_ids": preview["memory_ids"]}
    left = {m["memory_id"] for m in client.get("/v1/memories", params=ANA).json()["memories"]}
    assert late in left and not left & set(preview["memory_ids"])
    assert len(client.get("/v1/memories", params=BOB).json()["memories"]) == 1
    records = client.get("/v1/memories/forgotten", params=ANA).json()["records"]
    assert {(r["reason"], r["actor"]) for r in records} == {("user asked", ACTOR)}


def test_cli_edit_versions_forget_and_forgotten(tmp_path, service) -> None:
    [mem] = service.add_session(parrot())[:1]
    store = str(tmp_path / "store")
    who = ["--store", store, "--app", "app", "--user", "alice", "--embedder", "none"]
    runner = CliRunner()
    r = runner.invoke(
        cli_app,
        [
            "memory",
            "edit",
            mem.memory_id,
            *who,
            "--text",
            "Corrected by hand.",
            "--actor",
            "ops:eve",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    new = json.loads(r.stdout)["memory"]
    assert new["edited_by"] == "ops:eve" and new["previous_versions"][0]["text"] == mem.text
    r = runner.invoke(cli_app, ["memory", "versions", mem.memory_id, *who[:6], "--json"])
    assert [v["current"] for v in json.loads(r.stdout)["versions"]] == [False, True]
    r = runner.invoke(cli_app, ["memory", "forget", *who, "--query", "parrot"])
    assert r.exit_code == 2 and "--dry-run" in r.output  # no forget without a preview
    r = runner.invoke(
        cli_app,
        ["memory", "forget", *who, "--query", "parrot", "--dry-run", "--top-k", "2", "--json"],
    )
    preview = json.loads(r.stdout)
    r = runner.invoke(
        cli_app,
        [
            "memory",
            "forget",
            *who,
            "--confirm",
            preview["confirm_token"],
            "--reason",
            "asked",
            "--json",
        ],
    )
    assert json.loads(r.stdout)["forgotten"] == len(preview["memory_ids"]) > 0
    r = runner.invoke(cli_app, ["memory", "forget", *who, "--id", "no-such-id"])
    assert r.exit_code == 1 and "no memory" in r.output
    r = runner.invoke(cli_app, ["memory", "forgotten", *who[:6], "--json"])
    reasons = [x["reason"] for x in json.loads(r.stdout)["records"]]
    assert reasons.count("asked") == len(preview["memory_ids"])
    assert f"edited: now {new['memory_id']}" in reasons


def test_webhook_settings_attach_to_the_service(tmp_path, service) -> None:
    plain = parse_settings({"store": str(tmp_path / "store")})
    assert attach_webhook(service, plain.hooks) is None
    s = parse_settings(
        {
            "store": str(tmp_path / "store"),
            "hooks": {
                "webhook_url": "http://127.0.0.1:9/hook",
                "webhook_events": ["on_memory_forgotten"],
            },
        }
    )
    hook = attach_webhook(service, s.hooks)
    assert hook is not None and hook.url == "http://127.0.0.1:9/hook"
    assert service.hooks.wants("on_memory_forgotten")
    assert not service.hooks.wants("on_memory_recalled")
    with pytest.raises(SettingsError) as bad:
        parse_settings({"store": str(tmp_path / "store"), "hooks": {"webhook_url": "ftp://x"}})
    assert bad.value.field == "hooks.webhook_url"


def test_a_client_cannot_post_a_consolidated_summary(client) -> None:
    r = client.post(
        "/v1/memories",
        json={
            **ANA,
            "memories": [
                {"text": "I like tea."},
                {
                    "text": "merges your memories",
                    "kind": "consolidated_summary",
                    "source_event_ids": ["m1", "m2"],
                },
            ],
        },
    )
    assert error(r, 422)["field"] == "memories.1.kind"
    assert client.get("/v1/memories", params=ANA).json()["memories"] == []  # nothing written


def test_a_forged_confirm_token_is_a_422_naming_confirm(client, service) -> None:
    import base64
    import hashlib
    import hmac
    import zlib

    from mnemoray.memory.service import forget_query

    key = forget_query.token_key(service.store.root)
    body = base64.urlsafe_b64encode(zlib.compress(b"[1,2]")).decode().rstrip("=")
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()[:32]
    r = client.post("/v1/memories:forget", json={**ANA, "confirm": f"{body}.{mac}"})
    assert error(r, 422)["field"] == "confirm"
