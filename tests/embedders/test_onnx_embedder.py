"""The ONNX Runtime embedder: parity with torch, the int8 gate, the export cache."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mnemoray.embedders import (
    PACKAGED_MODEL_ID,
    PARITY_MIN_COSINE,
    EmbedderError,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    onnx,
    open_embedder,
    resolve,
    verify_parity,
)
from mnemoray.embedders import torch as torch_embedders

_VOCABULARY = """memory agent session user prefers window seat flight invoice refund cluster
replica latency budget parrot apartment lease doctor appointment quarterly report the a of to
and in my your was will can please tomorrow yesterday Paris Berlin deploy error Python Ray Serve
recall summary customer escalation ticket birthday sister"""
WORDS = tuple(_VOCABULARY.split())
SPECIAL = [
    "?",
    "",
    " ",
    "\n\t",
    "ok",
    "A",
    "!!!",
    "...",
    "🦜",
    "🦜🏠✈️🎉",
    "日本語のテキスト",
    "中文文本测试句子",
    "한국어 문장입니다",
    "مرحبا بالعالم",
    "שלום עולם",
    "Ünïcödé façade naïve café",
    "Straße Ærø Ωmega ǅ ﬁ",
    "ALL CAPS QUERY ABOUT FLIGHTS",
    "MiXeD CaSe PaRrOt",
    "x" * 300,
    "1234567890",
    "3.14159 2.71828",
    "2024-06-01T12:00:00Z",
    "user@example.com",
    "#42 @bob $19.99",
    "def f(x): return x * 2",
    "SELECT * FROM memories WHERE k = 5;",
    "<b>html</b> &amp; tags",
    "a\u200bzero\u200bwidth",
    "tab\tseparated\tvalues",
    "emoji 🦜 and arabic مرحبا in one",
    "   leading and trailing spaces   ",
    "word " * 5,
    "supercalifragilisticexpialidocious",
    "e\u0301 combining accent",
    "\u00a0non-breaking\u00a0space",
    "?" * 50,
    "🙂" * 40,
]


def _varied_texts() -> list[str]:
    rng = random.Random(1234)

    def words(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    short = [words(rng.randint(1, 12)) for _ in range(150)]
    medium = [words(rng.randint(20, 50)) + "." for _ in range(50)]
    long = [words(rng.randint(260, 300)) for _ in range(10)]  # > 256 tokens: truncated
    texts = short + medium + long + SPECIAL
    rng.shuffle(texts)  # mixed lengths inside every batch: padding everywhere
    return texts


TEXTS = _varied_texts()


@pytest.fixture(scope="module")
def torch_embedder():
    loaded = open_embedder("torch")
    assert isinstance(loaded, SentenceTransformerEmbedder)
    return loaded


@pytest.fixture(scope="module")
def reference_vectors(torch_embedder):
    return torch_embedder.encode(TEXTS)


def _min_cosine(embedder, reference_vectors, batch_size: int) -> float:
    got = embedder.encode(TEXTS, batch_size=batch_size)
    return float(np.min(np.sum(got * reference_vectors, axis=1)))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def onnx_fp32(cache_dir, torch_embedder):
    return OnnxEmbedder(cache_dir=cache_dir, reference=torch_embedder)


@pytest.mark.slow  # a sweep over 240+ texts at three batch sizes
def test_fp32_parity_with_torch_on_varied_texts(onnx_fp32, torch_embedder, reference_vectors):
    assert len(TEXTS) >= 240
    assert max(map(len, TEXTS)) > 1500 and "" in TEXTS and "?" in TEXTS
    for batch_size in (1, 7, 64):
        worst = _min_cosine(onnx_fp32, reference_vectors, batch_size)
        assert worst >= PARITY_MIN_COSINE, (batch_size, worst)
    # verify_parity is the same measurement (the minimum over its batch sizes).
    subset = TEXTS[:40]
    expected = min(
        float(
            np.min(np.sum(onnx_fp32.encode(subset, batch_size=b) * reference_vectors[:40], axis=1))
        )
        for b in (1, 16)
    )
    assert verify_parity(onnx_fp32, torch_embedder, subset) == pytest.approx(expected, abs=1e-6)
    # The built-in check at construction passed too, and so it carries the torch id.
    assert onnx_fp32.verified and onnx_fp32.parity_min_cosine >= PARITY_MIN_COSINE
    assert onnx_fp32.model_id == torch_embedder.model_id == PACKAGED_MODEL_ID
    assert onnx_fp32.dim == torch_embedder.dim == 384
    assert onnx_fp32.max_seq_length == 256


@pytest.mark.slow  # exports and quantizes a second model
def test_int8_is_refused_unless_it_passes_parity(
    cache_dir, torch_embedder, reference_vectors, monkeypatch
):
    unverified = OnnxEmbedder(cache_dir=cache_dir, quantize=True, verify=False)
    worst = min(_min_cosine(unverified, reference_vectors, b) for b in (1, 64))
    if worst >= PARITY_MIN_COSINE:  # a future recipe that passes may carry the torch id
        verified = OnnxEmbedder(cache_dir=cache_dir, quantize=True, reference=torch_embedder)
        assert verified.model_id == PACKAGED_MODEL_ID
        return
    with pytest.raises(EmbedderError, match=r"int8 .*failed the parity check.*< 0\.999"):
        OnnxEmbedder(cache_dir=cache_dir, quantize=True, reference=torch_embedder)
    # Unchecked use is possible, but never under the torch model's id.
    assert unverified.model_id != PACKAGED_MODEL_ID
    assert unverified.model_id.endswith("+onnx-int8-unverified")
    monkeypatch.setenv("MNEMORAY_ONNX_CACHE", str(cache_dir))
    with pytest.raises(EmbedderError, match="parity"):  # the recorded result, no torch
        open_embedder("onnx-int8")


def test_export_and_verification_are_cached(onnx_fp32, cache_dir, monkeypatch):
    model_file = onnx_fp32.fp32_path
    record = model_file.parent / "parity-fp32.json"
    before = (model_file.stat().st_mtime_ns, record.stat().st_mtime_ns)

    def forbidden(*args, **kwargs):
        raise AssertionError("the cached export / parity record should have been reused")

    monkeypatch.setattr(onnx, "_export_onnx", forbidden)
    monkeypatch.setattr(onnx, "verify_parity", forbidden)
    monkeypatch.setattr(torch_embedders, "SentenceTransformerEmbedder", forbidden)
    again = OnnxEmbedder(cache_dir=cache_dir)
    assert (model_file.stat().st_mtime_ns, record.stat().st_mtime_ns) == before
    assert again.model_id == PACKAGED_MODEL_ID and again.cache_path == onnx_fp32.cache_path
    text = ["a sentence to embed"]
    np.testing.assert_allclose(again.encode(text), onnx_fp32.encode(text), atol=1e-6)
    # Only the finished files and the lock are left: temp files were renamed into place.
    leftovers = [
        p.name for p in model_file.parent.iterdir() if p.name.endswith(".tmp") or ".tmp." in p.name
    ]
    assert leftovers == []

    # The spec goes to the same cache and is loaded once per process.
    monkeypatch.setenv("MNEMORAY_ONNX_CACHE", str(cache_dir))
    monkeypatch.setattr(resolve, "_cache", {})
    spec = open_embedder("onnx")
    assert isinstance(spec, OnnxEmbedder) and open_embedder(" ONNX ") is spec
    assert spec.model_id == PACKAGED_MODEL_ID


def test_a_failed_record_is_refused(onnx_fp32, cache_dir, tmp_path):
    # A stored result below the gate is enforced on every start, not re-measured.
    import json
    import shutil

    copy = tmp_path / "cache"
    shutil.copytree(onnx_fp32.cache_path, copy / onnx_fp32.cache_path.name)
    record_file = copy / onnx_fp32.cache_path.name / "parity-fp32.json"
    record = json.loads(record_file.read_text())
    record["min_cosine"] = 0.5
    record_file.write_text(json.dumps(record))
    with pytest.raises(EmbedderError, match="0.50000 < 0.999"):
        OnnxEmbedder(cache_dir=copy)
    assert OnnxEmbedder(cache_dir=copy, verify=False).model_id.endswith("+onnx-unverified")


def test_shape_norm_determinism_and_semantics(onnx_fp32):
    out = onnx_fp32.encode(["hello world", "a second, longer sentence about parrots", "x"])
    assert out.shape == (3, 384) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    texts = [f"memory number {i} about topic {i % 3}" for i in range(7)]
    a, b = onnx_fp32.encode(texts), onnx_fp32.encode(texts)
    assert np.array_equal(a, b)
    np.testing.assert_allclose(a, onnx_fp32.encode(texts, batch_size=2), atol=1e-5)
    query, parrot, lease = onnx_fp32.encode(
        ["that flying animal", "African Grey parrot", "apartment lease"]
    )
    assert query @ parrot > query @ lease + 0.1
    empty = onnx_fp32.encode([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    with pytest.raises(EmbedderError, match="single string"):
        onnx_fp32.encode("just one string")


def test_bad_arguments(tmp_path):
    with pytest.raises(EmbedderError, match="threads"):
        OnnxEmbedder(threads=0, cache_dir=tmp_path)
    with pytest.raises(EmbedderError, match="no-such-model"):
        OnnxEmbedder(tmp_path / "no-such-model", cache_dir=tmp_path)
    not_st = tmp_path / "plain"
    not_st.mkdir()
    with pytest.raises(EmbedderError, match="modules.json"):
        OnnxEmbedder(not_st, cache_dir=tmp_path)
