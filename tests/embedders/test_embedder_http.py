"""The OpenAI-compatible embeddings provider against real HTTP servers in this process.

One server answers /v1/embeddings with the packaged all-MiniLM-L6-v2 run by torch (as a
TEI or vLLM server would run it), so the parity gate against the local ONNX build passes
for real; another answers with a different model of the same dimension (MiniLM's
vectors under a fixed random rotation), which the gate and the store refuse.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.cli.main import app
from mnemoray.embedders import (
    PACKAGED_MODEL_ID,
    PARITY_MIN_COSINE,
    EmbedderError,
    EmbedderSpec,
    ModelMismatch,
    OpenAIEmbedder,
    RemoteEmbedderError,
    open_embedder,
    resolve,
    resolve_spec,
)
from mnemoray.embedders.openai_compat import embeddings_endpoint
from mnemoray.errors import ConfigError, InvalidInput, Unavailable
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers import ExtractiveSummarizer
from tests.support.archive_gen import make_archive

MINILM = PACKAGED_MODEL_ID  # vLLM and TEI serve a hub model under its hub name
OTHER = "test/rotated-minilm"


@dataclass
class Served:
    """What one test server answers, and what it was asked."""

    model: str
    encode: Callable[[list[str]], np.ndarray]
    key: str | None = None
    fail_next: int = 0  # answer fail_status this many times first
    fail_status: int = 503
    batches: list[int] = field(default_factory=list)
    auth_headers: list[str | None] = field(default_factory=list)


def _handler(served: Served) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def _answer(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            served.auth_headers.append(self.headers.get("Authorization"))
            if self.path != "/v1/embeddings":
                return self._answer(404, {"detail": "Not Found"})
            if served.key and self.headers.get("Authorization") != f"Bearer {served.key}":
                return self._answer(401, {"error": {"message": "invalid api key"}})
            if body.get("model") != served.model:
                return self._answer(
                    404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}
                )
            if served.fail_next > 0:
                served.fail_next -= 1
                retry = {"Retry-After": "0"} if served.fail_status == 429 else {}
                return self._answer(served.fail_status, {"message": "busy"}, retry)
            texts = body["input"]
            served.batches.append(len(texts))
            vectors = served.encode(texts)
            # Reversed, with indexes: the client must order by index, not by position.
            data = [
                {"object": "embedding", "index": i, "embedding": vectors[i].tolist()}
                for i in reversed(range(len(texts)))
            ]
            return self._answer(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": served.model,
                    "usage": {"prompt_tokens": 0, "total_tokens": 0},
                },
            )

    return Handler


@pytest.fixture(scope="module")
def torch_minilm():
    return open_embedder("torch")


@pytest.fixture(scope="module", autouse=True)
def _forget_remote_embedders() -> Iterator[None]:
    """The servers stop with this module: drop the embedders the resolver cached for them."""
    yield
    for key in [k for k in resolve._cache if k[0].remote]:
        resolve._cache.pop(key).close()


def _serve(served: Served) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def minilm_server(torch_minilm) -> Iterator[tuple[str, Served]]:
    served = Served(MINILM, lambda texts: torch_minilm.encode(texts))
    for url in _serve(served):
        yield url, served


@pytest.fixture(scope="module")
def other_server(torch_minilm) -> Iterator[tuple[str, Served]]:
    rotation, _ = np.linalg.qr(np.random.default_rng(7).normal(size=(384, 384)))
    served = Served(OTHER, lambda texts: torch_minilm.encode(texts) @ rotation)
    for url in _serve(served):
        yield url, served


@pytest.fixture
def flaky_server(torch_minilm) -> Iterator[tuple[str, Served]]:
    served = Served(MINILM, lambda texts: torch_minilm.encode(texts), key="s3cret-key")
    for url in _serve(served):
        yield url, served


def _memory_store(root: Path) -> MemoryStore:
    """A store built with the local packaged MiniLM (ONNX), holding one memory."""
    service = MemoryService.open(root, embedder="default")
    service.add_memories(
        [Memory("app", "carol", "s1", "fact", "Carol keeps an African Grey parrot named Kiwi.")]
    )
    assert service.store.manifest().embedding_model == PACKAGED_MODEL_ID
    return service.store


def test_parity_passes_for_the_same_model_and_a_local_store_takes_it(
    minilm_server, tmp_path
) -> None:
    url, served = minilm_server
    spec = f"openai,url={url},model={MINILM},parity_with=default,batch=8"
    remote = open_embedder(spec, _memory_store(tmp_path / "s"), "query")
    assert isinstance(remote, OpenAIEmbedder)
    assert (remote.model_id, remote.dim) == (PACKAGED_MODEL_ID, 384)
    assert remote.parity_min_cosine is not None and remote.parity_min_cosine >= PARITY_MIN_COSINE
    assert open_embedder(spec) is remote  # opened once per process, like local models

    texts = [f"memory {i}: the user likes window seats on flight {i}" for i in range(20)]
    served.batches.clear()
    got = remote.encode(texts, batch_size=64)
    assert served.batches == [8, 8, 4]  # the spec's batch caps the caller's
    assert got.shape == (20, 384) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    local = open_embedder("default").encode(texts)
    assert float(np.min(np.einsum("ij,ij->i", got, local))) >= PARITY_MIN_COSINE

    # The local store answers a query embedded by the server as the local model would.
    query = "what pet bird does she have"
    by_server = MemoryService(MemoryStore(tmp_path / "s"), remote, ExtractiveSummarizer())
    by_local = MemoryService.open(tmp_path / "s", embedder="default")
    (hit,) = by_server.search("app", "carol", query, top_k=1, mode="dense")
    (same,) = by_local.search("app", "carol", query, top_k=1, mode="dense")
    assert "parrot" in hit.memory.text and hit.signals["dense"] > 0.3
    assert hit.signals["dense"] == pytest.approx(same.signals["dense"], abs=1e-3)


def test_without_parity_it_is_another_model_refused_before_any_request(
    minilm_server, tmp_path
) -> None:
    url, served = minilm_server
    store = _memory_store(tmp_path / "s")
    spec = f"openai,url={url},model={MINILM}"
    before = len(served.auth_headers)
    with pytest.raises(ModelMismatch, match="parity_with") as info:
        open_embedder(spec, store)
    assert info.value.field == "embedder"
    assert len(served.auth_headers) == before  # refused on the spec, nothing was sent
    remote = open_embedder(spec)  # with no store: its own model id
    assert (remote.model_id, remote.dim) == (f"openai:{MINILM}", 384)


def test_a_different_model_fails_parity_and_is_refused_by_a_store(other_server, tmp_path):
    url, _ = other_server
    with pytest.raises(EmbedderError, match="minimum cosine") as info:
        open_embedder(f"openai,url={url},model={OTHER},parity_with=default")
    assert info.value.field == "embedder.parity_with"
    store = _memory_store(tmp_path / "s")
    with pytest.raises(ModelMismatch, match=f"openai:{OTHER}"):
        open_embedder(f"openai,url={url},model={OTHER}", store)
    # parity_with names a model, which must be the store's own.
    with pytest.raises(ModelMismatch, match="e5"):
        resolve_spec(f"openai,url={url},model={OTHER},parity_with=./models/e5", store)


def test_backfill_through_the_spec_end_to_end(minilm_server, other_server, tmp_path) -> None:
    url, _ = minilm_server
    make_archive(tmp_path / "archive", 4, files=1, bad=False, parquet=False)
    store = tmp_path / "store"
    spec = f"openai,url={url},model={MINILM},parity_with=default,batch=16"
    report = backfill(BackfillConfig(tmp_path / "archive", store, embedder=spec))
    assert report.sessions_committed == 4 and report.memories_written > 4
    manifest = MemoryStore(store).manifest()
    assert (manifest.embedding_model, manifest.dim) == (PACKAGED_MODEL_ID, 384)
    # Built by the server, read by the local model: the same vectors, the same id.
    local = MemoryService.open(store, embedder="default")
    hits = local.search("app", "u0", "beagle named Max", top_k=3)
    assert any("beagle" in h.memory.text.lower() for h in hits)

    # The other model on this store is refused before any work.
    other_url, _ = other_server
    with pytest.raises(ModelMismatch):
        backfill(
            BackfillConfig(
                tmp_path / "archive", store, embedder=f"openai,url={other_url},model={OTHER}"
            )
        )
    # A store built by a server's own model tells a local spec how to open it.
    make_archive(tmp_path / "archive2", 2, files=1, bad=False, parquet=False)
    remote_store = tmp_path / "remote-store"
    backfill(
        BackfillConfig(
            tmp_path / "archive2", remote_store, embedder=f"openai,url={other_url},model={OTHER}"
        )
    )
    assert MemoryStore(remote_store).manifest().embedding_model == f"openai:{OTHER}"
    with pytest.raises(ModelMismatch, match=f"model={OTHER}"):
        open_embedder("default", MemoryStore(remote_store))


def test_retries_429_and_5xx_then_answers(flaky_server, monkeypatch) -> None:
    url, served = flaky_server
    monkeypatch.setenv("EMB_KEY", "s3cret-key")
    served.fail_next, served.fail_status = 2, 503
    embedder = OpenAIEmbedder(url, MINILM, key_env="EMB_KEY", retries=2, backoff_s=0.01)
    assert embedder.dim == 384 and served.fail_next == 0
    assert set(served.auth_headers) == {"Bearer s3cret-key"}
    served.fail_next, served.fail_status = 1, 429  # Retry-After: 0 is honoured
    assert embedder.encode(["hello", "world"]).shape == (2, 384)
    assert "s3cret" not in repr(embedder)

    served.fail_next, served.fail_status = 3, 500  # one more failure than retries
    with pytest.raises(RemoteEmbedderError) as info:
        embedder.encode(["hello"])
    assert isinstance(info.value, Unavailable) and info.value.status == 503
    assert "after 3 attempt(s): HTTP 500: busy" in str(info.value)
    assert "\n" not in str(info.value)


def test_the_key_comes_from_the_named_variable_only(flaky_server, monkeypatch) -> None:
    url, _ = flaky_server
    spec = EmbedderSpec.parse(f"openai,url={url},model={MINILM},key_env=EMB_KEY")
    assert "EMB_KEY" in str(spec) and "s3cret" not in str(spec)
    monkeypatch.delenv("EMB_KEY", raising=False)
    with pytest.raises(ConfigError, match="EMB_KEY is not set") as info:
        open_embedder(spec)
    assert info.value.field == "embedder.key_env"
    monkeypatch.setenv("EMB_KEY", "wrong")
    with pytest.raises(ConfigError, match="HTTP 401") as info:
        open_embedder(spec)
    assert info.value.field == "embedder.key_env"
    with pytest.raises(ConfigError, match="does not exist") as info:
        OpenAIEmbedder(url, "no/such-model", api_key="s3cret-key", retries=0)
    assert info.value.field == "model"


def test_every_answer_is_checked_against_the_probed_dimension(minilm_server) -> None:
    url, served = minilm_server
    embedder = OpenAIEmbedder(url, MINILM, retries=0)
    encode = served.encode
    served.encode = lambda texts: encode(texts)[:, :8]  # the server swapped its model
    try:
        with pytest.raises(RemoteEmbedderError, match=r"\[8\]-dimensional .* expected 384"):
            embedder.encode(["hello"])
    finally:
        served.encode = encode


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("openai,url=http://h:1", "embedder.model", "model="),
        ("openai,model=m", "embedder.url", "url=http://host:8000"),
        ("openai,model=m,url=localhost:8000", "embedder.url", r"http\(s\)://"),
        ("openai,model=m,url=http://h,batch=0", "embedder.batch", "positive integer"),
        ("openai,model=m,url=http://h,batch=many", "embedder.batch", "positive integer"),
        ("openai,model=m,url=http://h,retries=-1", "embedder.retries", ">= 0"),
        ("openai,model=m,url=http://h,timeout=0", "embedder.timeout", "positive number"),
        ("openai,model=m,url=http://h,key_env=sk-live-123", "embedder.key_env", "NAME"),
        ("openai,model=m,url=http://h,parity_with=none", "embedder.parity_with", "local model"),
        ("openai,model=m,url=http://h,threads=2", "embedder.threads", "runtime=openai"),
        ("openai,model=m,url=http://h,device=cuda", "embedder.device", "runtime=openai"),
        ("default,url=http://h", "embedder.url", "only for runtime=openai"),
        ("onnx,parity_with=default", "embedder.parity_with", "only for runtime=openai"),
    ],
)
def test_bad_options_name_the_option(text, field, message) -> None:
    with pytest.raises(InvalidInput, match=message) as info:
        EmbedderSpec.parse(text)
    assert info.value.field == field
    assert "sk-live" not in str(info.value)  # a key pasted by mistake is not echoed


def test_spec_round_trips() -> None:
    text = (
        f"openai,url=http://h:8000/v1,model={MINILM},key_env=EMB_KEY,batch=64,timeout=5,"
        f"retries=0,parity_with=default"
    )
    spec = EmbedderSpec.parse(text)
    assert spec.remote and spec.model == MINILM and not spec.packaged
    assert EmbedderSpec.parse(str(spec)) == spec
    for base in (
        "http://h:8000",
        "http://h:8000/",
        "http://h:8000/v1",
        "http://h:8000/v1/",
        "http://h:8000/v1/embeddings",
    ):
        assert embeddings_endpoint(base) == "http://h:8000/v1/embeddings"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_server_is_unavailable_in_one_line(tmp_path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(Unavailable) as info:
        open_embedder(f"openai,url={url},model=m,retries=1")
    message = str(info.value)
    assert "\n" not in message and url in message and "ConnectError" in message
    assert "after 2 attempt(s)" in message

    _memory_store(tmp_path / "s")
    result = CliRunner().invoke(
        app,
        [
            "recall",
            "--store",
            str(tmp_path / "s"),
            "--app",
            "app",
            "--user",
            "carol",
            "--embedder",
            f"openai,url={url},model={MINILM},retries=0,parity_with=default",
            "parrot",
        ],
    )
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and url in result.output
