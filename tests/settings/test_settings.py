"""Settings without Ray: the layers (flag > env > file > default), unknown keys, the
environment's nesting, and per-app recall configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemoray.errors import ConfigError, InvalidInput
from mnemoray.memory.recall.config import DEFAULT_WEIGHTS, RetrievalConfig
from mnemoray.settings.base import recall_settings, recall_settings_from_file, retrieval_config
from mnemoray.settings.serve import load_settings, nest, parse_settings, settings_from_env


def _write(path: Path, data: dict) -> Path:
    if path.suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        import yaml

        path.write_text(yaml.safe_dump(data))
    return path


# -- layers --------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_precedence_flag_over_env_over_file_over_default(tmp_path: Path, suffix: str) -> None:
    file = _write(
        tmp_path / f"settings{suffix}",
        {
            "store": str(tmp_path / "from-file"),
            "server": {"replicas": 2, "port": 9100},
            "models": {"summarizer": "extractive", "batch_max_size": 8},
        },
    )
    env = {
        "MNEMORAY_CONFIG": str(file),
        "MNEMORAY_SERVER__REPLICAS": "3",
        "MNEMORAY_MODELS__BATCH_MAX_SIZE": "12",
    }
    s = load_settings({"server.replicas": "4"}, env=env)
    assert s.server.replicas == 4  # flag
    assert s.models.batch_max_size == 12  # env over file
    assert s.server.port == 9100  # file over default
    assert s.server.host == "127.0.0.1"  # default
    assert s.store == str(tmp_path / "from-file")
    assert load_settings(env=env).server.replicas == 3
    assert load_settings({"config": str(file)}, env={}).server.replicas == 2
    assert load_settings({"store": str(tmp_path)}, env={}).server.replicas == 1


def test_the_config_flag_beats_the_config_variable(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.yaml", {"store": str(tmp_path), "server": {"port": 1111}})
    b = _write(tmp_path / "b.yaml", {"store": str(tmp_path), "server": {"port": 2222}})
    assert load_settings({"config": str(b)}, env={"MNEMORAY_CONFIG": str(a)}).server.port == 2222


def test_groups_merge_across_layers_and_flags_nest(tmp_path: Path) -> None:
    file = _write(
        tmp_path / "s.yaml",
        {
            "store": str(tmp_path),
            "ingestion": {"trigger": {"type": "inactivity", "inactivity_s": 60}},
        },
    )
    s = load_settings({"config": str(file), "ingestion.trigger.inactivity_s": "5"}, env={})
    assert s.ingestion.trigger.type == "inactivity" and s.ingestion.trigger.inactivity_s == 5
    assert nest({"a.b": 1, "a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}
    with pytest.raises(ConfigError) as twice:
        nest({"a.b": 1, "a": {"b": 2}})
    assert twice.value.field == "a.b"


def test_serve_run_string_arguments(tmp_path: Path) -> None:
    # `serve run mnemoray.serve.app:build_app KEY=VALUE ...` passes strings only.
    s = load_settings(
        {
            "store": str(tmp_path),
            "server.replicas": "2",
            "server.offload_search": "true",
            "models.summarizer_options": '{"model": "m"}',
            "recall.apps.bot.weights": '{"recency": 0.2}',
        },
        env={},
    )
    assert s.server.replicas == 2 and s.server.offload_search
    assert s.models.summarizer_options == {"model": "m"}
    assert s.retrieval_for("bot").weights["recency"] == 0.2
    with pytest.raises(ConfigError, match="sever: unknown setting; known: "):
        load_settings({"store": str(tmp_path), "sever.replicas": "2"}, env={})


def test_replicas_get_settings_that_round_trip(tmp_path: Path) -> None:
    s = load_settings(
        {"store": str(tmp_path), "recall.apps.bot.mode": "dense", "recall.weights.bm25": "0.3"},
        env={},
    )
    again = parse_settings(s.model_dump())
    assert again == s
    assert again.retrieval_for("bot") == s.retrieval_for("bot")


# -- unknown and moved keys ----------------------------------------------------------------
@pytest.mark.parametrize(
    "flags, field",
    [
        ({"server.replica": 2}, "server.replica"),
        ({"sever.replicas": 2}, "sever"),
        ({"recall.apps.bot.mdoe": "dense"}, "recall.apps.bot.mdoe"),
        ({"ingestion.trigger.kind": "x"}, "ingestion.trigger.kind"),
    ],
)
def test_unknown_keys_are_errors_naming_the_key(tmp_path: Path, flags: dict, field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings({"store": str(tmp_path), **flags}, env={})
    assert exc.value.field == field
    assert isinstance(exc.value, InvalidInput)


def test_unknown_keys_in_a_file_and_the_environment(tmp_path: Path) -> None:
    file = _write(tmp_path / "s.yaml", {"store": str(tmp_path), "replicas": 2})
    with pytest.raises(ConfigError, match=r"replicas: moved: use server.replicas \(in ") as f:
        load_settings({"config": str(file)}, env={})
    assert f.value.field == "replicas"
    for env, field in [
        ({"MNEMORAY_FOO": "1"}, "MNEMORAY_FOO"),
        ({"MNEMORAY_REPLICAS": "2"}, "MNEMORAY_REPLICAS"),
        ({"MNEMORAY_API_KEYS": "/k.json"}, "MNEMORAY_API_KEYS"),
        ({"MNEMORAY_SERVER__REPLICA": "2"}, "server.replica"),
    ]:
        with pytest.raises(ConfigError) as exc:
            load_settings({"store": str(tmp_path)}, env=env)
        assert exc.value.field == field, env
    with pytest.raises(ConfigError, match="MNEMORAY_SERVER__API_KEYS"):
        load_settings({"store": str(tmp_path)}, env={"MNEMORAY_API_KEYS": "/k.json"})
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings({"config": str(tmp_path / "missing.yaml")}, env={})


def test_old_flat_flags_name_their_new_place(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="models.query_threads") as exc:
        load_settings({"store": str(tmp_path), "query_threads": "1"}, env={})
    assert exc.value.field == "query_threads"


def test_bad_values_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings({"store": str(tmp_path), "server.replicas": "0"}, env={})
    assert exc.value.field == "server.replicas"
    with pytest.raises(ConfigError) as missing:
        load_settings({}, env={})
    assert missing.value.field == "store"


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("server.header_timeout_s", "0"),
        ("server.header_timeout_s", "7200"),
        ("server.body_timeout_s", "-1"),
        ("server.max_connections_per_client", "-1"),
        ("server.max_connections_per_client", "many"),
    ],
)
def test_slow_client_limits_are_validated(tmp_path: Path, key: str, bad: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings({"store": str(tmp_path), key: bad}, env={})
    assert exc.value.field == key


def test_slow_client_limits_default_and_come_from_any_layer(tmp_path: Path) -> None:
    server = load_settings({"store": str(tmp_path)}, env={}).server
    assert (server.header_timeout_s, server.body_timeout_s) == (10.0, 30.0)
    assert server.max_connections_per_client == 64
    env = {"MNEMORAY_SERVER__MAX_CONNECTIONS_PER_CLIENT": "0"}  # 0: no cap
    flags = {"store": str(tmp_path), "server.header_timeout_s": "2.5"}
    server = load_settings(flags, env=env).server
    assert (server.header_timeout_s, server.max_connections_per_client) == (2.5, 0)


# -- the environment -----------------------------------------------------------------------
def test_environment_nesting_and_json_values(tmp_path: Path) -> None:
    env = {
        "MNEMORAY_STORE": str(tmp_path),
        "MNEMORAY_SERVER__NUM_CPUS__INGRESS": "1.5",
        "MNEMORAY_MODELS__SUMMARIZER_OPTIONS": '{"model": "m", "base_url": "http://x"}',
        "MNEMORAY_SERVER__API_KEYS": '{"k1": "app"}',
        "mnemoray_recall__apps__Support__recency_window": "0.1",
        "MNEMORAY_RECALL__WEIGHTS__BM25": "0.3",
        "MNEMORAY_ONNX_CACHE": "/cache",
        "MNEMORAY_CRASH_AFTER": "",  # not settings
        "MNEMORAY_SERVER__PORT": "",
        "PATH": "/bin",
    }  # empty: unset
    s = load_settings(env=env)
    assert s.server.num_cpus.ingress == 1.5 and s.server.port == 8000
    assert s.models.summarizer_options == {"model": "m", "base_url": "http://x"}
    assert s.server.api_keys == {"k1": "app"}
    # Environment names are case-insensitive: app names arrive lower-cased.
    assert s.retrieval_for("support").recency_window == 0.1
    assert s.retrieval_for("support").weights["bm25"] == 0.3
    assert settings_from_env({"MNEMORAY_SERVER__API_KEYS": "/etc/keys.json"}) == {
        "server": {"api_keys": "/etc/keys.json"}
    }


# -- recall ---------------------------------------------------------------------------------
def test_retrieval_config_from_a_mapping() -> None:
    cfg = retrieval_config({"mode": "dense", "depth": "50", "weights": {"bm25": "0.5"}})
    assert cfg == RetrievalConfig(mode="dense", depth=50, weights={"bm25": 0.5})
    assert retrieval_config({}) == RetrievalConfig()
    for bad, field in [
        ({"mode": "fuzzy"}, "recall.mode"),
        ({"dpeth": 1}, "recall.dpeth"),
        ({"depth": "many"}, "recall.depth"),
        ({"weights": "x"}, "recall.weights"),
    ]:
        with pytest.raises(InvalidInput) as exc:
            retrieval_config(bad)
        assert exc.value.field == field, bad
    # RetrievalConfig's own value rules, named under where the value came from.
    with pytest.raises(ConfigError) as rule:
        retrieval_config({"depth": 0}, where="recall.apps.bot")
    assert rule.value.field == "recall.apps.bot.depth"


def test_per_app_overrides_merge_over_the_default() -> None:
    r = recall_settings(
        {
            "recency_window": 0.08,
            "weights": {"bm25": 0.2},
            "apps": {"bot": {"mode": "keyword", "weights": {"recency": 0.1}}, "plain": {}},
        }
    )
    bot, other = r.retrieval_for("bot"), r.retrieval_for("someone-else")
    assert bot.mode == "keyword" and bot.recency_window == 0.08
    assert bot.weights == {**DEFAULT_WEIGHTS, "bm25": 0.2, "recency": 0.1}
    assert other == r.default == r.retrieval_for("plain")
    assert r.app_configs == {"bot": bot, "plain": other}
    assert other.mode == "hybrid" and other.weights["bm25"] == 0.2
    assert other.weights["recency"] == DEFAULT_WEIGHTS["recency"]
    with pytest.raises(ConfigError) as exc:
        recall_settings({"apps": {"bot": {"weights": {"nope": 1}}}})
    assert exc.value.field == "recall.apps.bot.weights"
    with pytest.raises(ConfigError) as negative:
        recall_settings({"weights": {"dense": -1}})
    assert negative.value.field == "recall.weights.dense"


def test_recall_group_of_a_settings_file(tmp_path: Path) -> None:
    file = _write(
        tmp_path / "s.yaml", {"store": "/elsewhere", "recall": {"apps": {"bot": {"depth": 20}}}}
    )
    assert recall_settings_from_file(file).retrieval_for("bot").depth == 20
    assert recall_settings_from_file(_write(tmp_path / "e.json", {})).default == RetrievalConfig()


# -- the CLI -------------------------------------------------------------------------------
def test_cli_serve_reads_the_config_file_and_environment(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from mnemoray.cli.main import app

    for name in ("MNEMORAY_CONFIG", "MNEMORAY_SERVER__API_KEYS", "MNEMORAY_SERVER__HOST"):
        monkeypatch.delenv(name, raising=False)
    file = _write(tmp_path / "s.yaml", {"store": str(tmp_path), "server": {"host": "0.0.0.0"}})
    # No keys and a public host from the file: refused before Ray starts.
    result = CliRunner().invoke(app, ["serve", "--config", str(file)])
    assert result.exit_code == 2 and "--host needs API keys" in result.output
    monkeypatch.setenv("MNEMORAY_SERVER__HOST", "10.0.0.1")
    result = CliRunner().invoke(app, ["serve", "--store", str(tmp_path)])
    assert result.exit_code == 2 and "--host needs API keys" in result.output
    bad = CliRunner().invoke(
        app, ["serve", "--config", str(file), "--set", "recall.apps.bot.mode=fuzzy"]
    )
    assert bad.exit_code == 2 and "recall.apps.bot.mode" in bad.output


def test_cli_recall_takes_its_ranking_from_a_config_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mnemoray.cli.main import app
    from mnemoray.memory.service.service import MemoryService
    from tests.support.factories import parrot

    store = tmp_path / "kw"
    assert MemoryService.open(store, embedder=None).add_session(parrot())
    base = [
        "recall",
        "--store",
        str(store),
        "--app",
        "app",
        "--user",
        "alice",
        "--embedder",
        "none",
        "--json",
        "African Grey parrot",
    ]
    # bm25 off for this app: only the entity signal ranks.
    file = _write(
        tmp_path / "s.yaml",
        {"recall": {"mode": "keyword", "apps": {"app": {"weights": {"bm25": 0}}}}},
    )
    result = CliRunner().invoke(app, [*base, "--config", str(file)])
    assert result.exit_code == 0, result.output
    memories = json.loads(result.stdout)["memories"]
    assert memories and all("bm25" not in m["signals"] for m in memories)
    plain = CliRunner().invoke(app, [*base, "--mode", "keyword"])
    assert "bm25" in json.loads(plain.stdout)["memories"][0]["signals"]
    bad = _write(tmp_path / "bad.yaml", {"recall": {"apps": {"app": {"mode": "fuzzy"}}}})
    result = CliRunner().invoke(app, [*base, "--config", str(bad)])
    assert result.exit_code == 2 and "recall.apps.app.mode" in result.output


URL_CASES = [
    (
        "ingestion.sessions_db",
        "redis://db.example/0",
        "a file path (SQLite), :memory: or a postgresql:// URL",
    ),
    ("ingestion.artifacts_dir", "s3://bucket/artifacts", "a directory path"),
    ("store", "postgresql://db.example/mem", "a directory, parquet://DIR or lancedb://DIR"),
    ("store", "postgresql:/db.example/mem", "a directory, parquet://DIR or lancedb://DIR"),
]


@pytest.mark.parametrize(("key", "value", "supported"), URL_CASES)
def test_a_url_where_a_path_is_expected_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, value: str, supported: str
) -> None:
    monkeypatch.chdir(tmp_path)  # where the URL used to become a file or folder
    with pytest.raises(ConfigError) as raised:
        load_settings({"store": str(tmp_path / "store"), key: value})
    assert raised.value.field == key
    assert str(raised.value) == f"{key}: {value} is not supported here; give {supported}"
    assert list(tmp_path.iterdir()) == []


def test_a_refused_url_keeps_its_credentials_out_of_the_message(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(
            {"store": str(tmp_path), "ingestion.sessions_db": "mysql://maya:hunter2@db/mem"}
        )
    assert "hunter2" not in str(raised.value) and "mysql://***@db/mem" in str(raised.value)


def test_paths_and_memory_sessions_still_open(tmp_path: Path) -> None:
    s = load_settings(
        {
            "store": f"lancedb://{tmp_path / 'ln'}",
            "ingestion.sessions_db": ":memory:",  # SQLite's, not a file in the cwd
            "ingestion.artifacts_dir": str(tmp_path / "C:weird" / "art"),
        }
    )
    assert s.store == f"lancedb://{tmp_path / 'ln'}" and s.sessions_path == ":memory:"
    assert s.artifacts_path == str(tmp_path / "C:weird" / "art")
