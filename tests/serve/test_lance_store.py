"""Ray Serve on a ``lancedb://`` store (setting ``store``): recall, online add and forget
over real HTTP; and the sharded index layout, which needs a Parquet store, refused by
name."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from mnemoray.errors import Unsupported
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.protocol import open_backend
from mnemoray.settings.serve import ServeSettings
from tests.support.factories import FLYING, parrot

APP_NAME = "mnemoray-lance-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_settings_keep_the_scheme_and_put_files_in_the_directory(tmp_path: Path) -> None:
    s = ServeSettings(store=f"lancedb://{tmp_path / 'ln'}")
    assert s.store == f"lancedb://{tmp_path / 'ln'}" and s.store_dir == tmp_path / "ln"
    assert s.sessions_path == str(tmp_path / "ln" / "sessions.db")
    with pytest.raises(Unsupported, match="index_mode sharded"):
        open_backend(s.store, s.shards, load_shards=[])  # what the ingress asks in that mode


def test_serve_on_a_lancedb_store(ray_cluster, tmp_path: Path) -> None:  # a ray test
    from ray import serve
    from ray.serve.context import _get_global_client

    from mnemoray.serve.app import build_app

    store = f"lancedb://{tmp_path / 'ln'}"
    seeded = MemoryService.open(store)
    assert seeded.add_session(parrot())
    seeded.close()
    serve.start(http_options={"host": "127.0.0.1", "port": _free_port()})
    port = _get_global_client().http_config.port
    serve.run(
        build_app({"store": store, "server": {"reload_interval_s": 0.1, "ingress": "proxy"}}),
        name=APP_NAME,
        route_prefix="/",
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
            r = c.post(
                "/v1/recall",
                json={"app_name": "app", "user_id": "alice", "query": FLYING, "top_k": 3},
            )
            assert r.status_code == 200, r.text
            assert r.json()["memories"][0]["provenance"]["session_id"] == "parrot"
            added = c.post(
                "/v1/memories",
                json={
                    "app_name": "app",
                    "user_id": "bob",
                    "memories": [{"text": "Bob keeps bees."}],
                },
            )
            assert added.status_code in (200, 201), added.text
            r = c.post(
                "/v1/recall",
                json={"app_name": "app", "user_id": "bob", "query": "honey bees", "top_k": 3},
            )
            assert [m["text"] for m in r.json()["memories"]] == ["Bob keeps bees."]
            gone = c.delete("/v1/users/app/alice/memories")
            assert gone.status_code == 200 and gone.json()["forgotten"] > 0, gone.text
            r = c.post("/v1/recall", json={"app_name": "app", "user_id": "alice", "query": FLYING})
            assert r.status_code == 200 and r.json()["memories"] == []
    finally:
        serve.delete(APP_NAME)
    assert open_backend(store).load().count("app", "alice") == 0
