"""EmbedderSpec parsing and open_embedder: one resolver, the same default everywhere."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from mnemoray.embedders import (
    PACKAGED_MODEL_ID,
    PURPOSES,
    Embedder,
    EmbedderError,
    EmbedderSpec,
    ModelMismatch,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    check_model,
    onnx,
    open_embedder,
    resolve,
    resolve_spec,
    write_model,
)
from mnemoray.errors import InvalidInput, StoreError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers import ExtractiveSummarizer


# -- parsing (no model is loaded) -------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("default", EmbedderSpec()),
        (" MiniLM ", EmbedderSpec()),
        ("none", EmbedderSpec(model=None)),
        ("Keyword", EmbedderSpec(model=None)),
        ("torch", EmbedderSpec(runtime="torch")),
        ("onnx", EmbedderSpec(runtime="onnx")),
        ("onnx-int8", EmbedderSpec(runtime="onnx", quantize=True)),
        ("./models/e5", EmbedderSpec(model="./models/e5")),
        ("org/Some-Model", EmbedderSpec(model="org/Some-Model")),  # names keep their case
        (
            "./models/e5, threads=2, spin=off",
            EmbedderSpec(model="./models/e5", threads=2, spin=False),
        ),
        ("default,runtime=TORCH,device=cuda:1", EmbedderSpec(runtime="torch", device="cuda:1")),
        ("onnx,spin=true,threads=1", EmbedderSpec(runtime="onnx", spin=True, threads=1)),
        ("model=none", EmbedderSpec(model=None)),
        ("runtime=torch", EmbedderSpec(runtime="torch")),
        (None, EmbedderSpec(model=None)),
    ],
)
def test_parse(text, expected) -> None:
    spec = EmbedderSpec.parse(text)
    assert spec == expected
    assert EmbedderSpec.parse(str(spec)) == spec  # the canonical string round-trips
    assert EmbedderSpec.parse(spec) is spec


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("", "embedder", "must not be empty"),
        ("default,runtime=tensorflow", "embedder.runtime", "one of auto, torch, onnx"),
        ("default,threads=x", "embedder.threads", "positive integer"),
        ("default,threads=0", "embedder.threads", "positive integer"),
        ("default,spin=maybe", "embedder.spin", "true or false"),
        ("default,colour=red", "embedder.colour", "unknown option"),
        ("default,threads=1,threads=2", "embedder.threads", "given twice"),
        ("default,quantize=true", "embedder.quantize", "runtime=onnx"),
        ("onnx,device=cuda", "embedder.device", "cpu only"),
        ("default,model=", "embedder.model", "must not be empty"),
        ("default,threads", "embedder", "key=value"),
    ],
)
def test_bad_specs_name_the_field(text, field, message) -> None:
    with pytest.raises(InvalidInput, match=message) as info:
        EmbedderSpec.parse(text)
    assert isinstance(info.value, EmbedderError)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_field_prefix_and_direct_construction() -> None:
    with pytest.raises(EmbedderError) as info:
        EmbedderSpec.parse("default,runtime=x", field="models.embedder")
    assert info.value.field == "models.embedder.runtime"
    with pytest.raises(EmbedderError) as info:
        EmbedderSpec(threads=-1)
    assert info.value.field == "threads"
    with pytest.raises(EmbedderError, match="purpose"):
        open_embedder("default", None, "training")


def test_override_keeps_what_is_not_given() -> None:
    spec = EmbedderSpec.parse("torch,threads=2")
    assert spec.override(runtime=None, threads=None) == spec
    assert spec.override(threads=4, device="cuda") == EmbedderSpec(
        runtime="torch", threads=4, device="cuda"
    )
    with pytest.raises(EmbedderError, match="cpu only"):
        EmbedderSpec.parse("onnx").override(device="cuda")


# -- stores --------------------------------------------------------------------------
class FakeEmbedder(Embedder):
    """Another model: deterministic unit vectors, 8 dimensions."""

    model_id = "test/other-model"
    dim = 8

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        rng = np.random.default_rng(len(texts))
        return rng.normal(size=(len(texts), self.dim)).astype(np.float32)


def _memory(text: str = "Carol is allergic to peanuts.") -> Memory:
    return Memory("app", "carol", "s1", "fact", text)


@pytest.fixture
def keyword_store(tmp_path) -> MemoryStore:
    service = MemoryService.open(tmp_path / "kw", embedder=None)
    service.add_memories([_memory()])
    assert service.store.manifest().keyword_only
    return MemoryStore(tmp_path / "kw")


@pytest.fixture
def other_store(tmp_path) -> MemoryStore:
    store = MemoryStore(tmp_path / "other")
    MemoryService(store, FakeEmbedder(), ExtractiveSummarizer()).add_memories([_memory()])
    assert store.manifest().embedding_model == "test/other-model"
    return store


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    loaded = open_embedder("default")
    assert loaded is not None
    return loaded


@pytest.fixture
def minilm_store(tmp_path, minilm) -> MemoryStore:
    store = MemoryStore(tmp_path / "minilm")
    MemoryService(store, minilm, ExtractiveSummarizer()).add_memories([_memory()])
    assert store.manifest().embedding_model == PACKAGED_MODEL_ID
    return store


def test_keyword_only_store_never_embeds(keyword_store, minilm) -> None:
    for purpose in PURPOSES:
        assert open_embedder("default", keyword_store, purpose) is None
        assert open_embedder("./any/model", keyword_store, purpose) is None
    assert open_embedder(minilm, keyword_store) is None  # a built one is dropped too
    assert resolve_spec("default", keyword_store) is None
    assert MemoryService.open(keyword_store.root).embedder is None
    assert write_model(keyword_store, None) == ("none", 0)


def test_the_same_default_for_every_purpose(tmp_path, minilm_store) -> None:
    stores = {"no store": None, "new": MemoryStore(tmp_path / "new"), "minilm": minilm_store}
    opened = {
        (name, purpose): open_embedder("default", store, purpose)
        for name, store in stores.items()
        for purpose in PURPOSES
    }
    kinds = {type(e) for e in opened.values()}
    # The parity-gated ONNX build where it loads; torch when it cannot (logged).
    assert kinds in ({OnnxEmbedder}, {SentenceTransformerEmbedder})
    assert {e.model_id for e in opened.values()} == {PACKAGED_MODEL_ID}
    # Loaded once per process: write and batch share one model; queries do not spin and
    # run one intra-op thread (beside the server's event loop) unless the spec says.
    assert opened[("no store", "write")] is opened[("minilm", "batch")]
    assert opened[("new", "query")] is opened[("minilm", "query")]
    if kinds == {OnnxEmbedder}:
        assert opened[("new", "query")].spin is False
        assert opened[("new", "query")].threads == resolve.QUERY_ONNX_THREADS == 1
        assert opened[("new", "write")].spin is True
        assert opened[("new", "write")].threads is None  # the runtime's own
        two = open_embedder("default,threads=2", minilm_store, "query")
        assert isinstance(two, OnnxEmbedder) and two.threads == 2
    # The service goes through it as well.
    assert MemoryService.open(minilm_store.root).embedder is opened[("new", "write")]
    # An explicit runtime is honoured, under the same model id.
    torch_one = open_embedder("torch", minilm_store, "query")
    assert isinstance(torch_one, SentenceTransformerEmbedder)
    assert torch_one.model_id == PACKAGED_MODEL_ID
    assert write_model(minilm_store, torch_one) == (PACKAGED_MODEL_ID, 384)


def test_another_models_store(other_store, minilm) -> None:
    # "default" is the store's own model (resolved without loading anything).
    assert resolve_spec("default", other_store) == EmbedderSpec(model="test/other-model")
    assert resolve_spec("test/other-model,threads=2", other_store).threads == 2
    # Naming any other model is refused before a model is loaded.
    with pytest.raises(ModelMismatch, match="embeds with 'test/other-model'") as info:
        open_embedder("./models/e5", other_store, "write")
    assert info.value.field == "embedder" and isinstance(info.value, InvalidInput)
    assert isinstance(info.value, StoreError)
    # A built embedder of another model, and keyword-only writes, are refused too.
    for purpose in PURPOSES:
        with pytest.raises(ModelMismatch, match="embeds with 'test/other-model'"):
            open_embedder(minilm, other_store, purpose)
    with pytest.raises(ModelMismatch, match="embeds with"):
        MemoryService(other_store, minilm, ExtractiveSummarizer())
    with pytest.raises(ModelMismatch, match="embeds with"):
        write_model(other_store, None)
    fake = FakeEmbedder()
    assert open_embedder(fake, other_store) is fake
    assert write_model(other_store, fake) == ("test/other-model", 8)


def test_check_model_is_the_one_check(minilm) -> None:
    check_model(minilm, None, None)  # nothing written yet: any model
    check_model(minilm, "none", 0)  # keyword-only: nothing to match
    check_model(None, PACKAGED_MODEL_ID, 384)  # nothing embeds
    check_model(minilm, PACKAGED_MODEL_ID, 384)
    check_model((PACKAGED_MODEL_ID, 384), PACKAGED_MODEL_ID, 384)  # a vector made elsewhere
    with pytest.raises(ModelMismatch, match=r"the store embeds with 'x' \(dim 384\)"):
        check_model(minilm, "x", 384)
    with pytest.raises(ModelMismatch, match="dim 8"):
        check_model((PACKAGED_MODEL_ID, 8), PACKAGED_MODEL_ID, 384)


def test_auto_falls_back_to_torch_with_a_warning(monkeypatch, caplog) -> None:
    def broken(*args, **kwargs):
        raise EmbedderError("no ONNX here", field="model")

    monkeypatch.setattr(resolve, "_cache", {})
    monkeypatch.setattr(onnx, "OnnxEmbedder", broken)
    with caplog.at_level(logging.WARNING, logger="mnemoray.embedders.resolve"):
        fallback = open_embedder("default", None, "query")
    assert isinstance(fallback, SentenceTransformerEmbedder)
    assert fallback.model_id == PACKAGED_MODEL_ID
    assert "no ONNX here" in caplog.text and "torch" in caplog.text
    # Asked for by name, ONNX does not fall back: the error is the caller's.
    with pytest.raises(EmbedderError, match="no ONNX here"):
        open_embedder("onnx", None, "query")
