"""The GPU embedder's host-side logic, run on CPU: packing, order, gate, options, errors.

``CudaEmbedder(device="cpu")`` runs the same tokenising, slicing, token-budget packing
and reordering as on a GPU (no pinned buffers or streams), so its vectors must equal
sentence-transformers'. The GPU figures come from ``benchmarks/embed_bench.py
--device cuda`` on a GPU machine.
"""

from __future__ import annotations

import numpy as np
import pytest

import mnemoray.embedders.cuda as cuda_module
from mnemoray.backfill import BackfillConfig
from mnemoray.backfill.config import RayOptions, default_workers
from mnemoray.embedders import (
    PACKAGED_MODEL_ID,
    PARITY_TEXTS,
    CudaEmbedder,
    Embedder,
    EmbedderError,
    EmbedderSpec,
    SentenceTransformerEmbedder,
    open_embedder,
)
from mnemoray.errors import InvalidInput
from mnemoray.pipeline.backfill import embed_layout

TEXTS = [*PARITY_TEXTS, *(f"turn {i}: " + "word " * (i % 37) for i in range(60))]


@pytest.fixture(scope="module")
def reference() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


@pytest.fixture(scope="module")
def packed(reference) -> CudaEmbedder:
    return CudaEmbedder(device="cpu", reference=reference, max_batch_tokens=512)


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.min(np.sum(a * b, axis=1)))


def test_vectors_equal_sentence_transformers_in_input_order(packed, reference) -> None:
    got = packed.encode(TEXTS)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert _min_cosine(got, reference.encode(TEXTS)) >= 0.99999
    assert packed.model_id == PACKAGED_MODEL_ID and packed.dtype == "float32"
    # A small budget cut the input into many batches; every row was computed once.
    assert packed.stats.batches > 3 and packed.stats.texts == len(TEXTS)
    assert packed.stats.tokens <= packed.stats.padded_tokens


def test_rows_cap_and_slices_across_the_pool(reference, monkeypatch) -> None:
    monkeypatch.setattr(cuda_module, "_TOKENIZE_SLICE", 7)  # many slices, tokenised on 2 threads
    emb = CudaEmbedder(device="cpu", reference=reference, tokenize_threads=2)
    got = emb.encode(TEXTS, batch_size=5)
    assert _min_cosine(got, reference.encode(TEXTS)) >= 0.99999
    assert emb.stats.batches >= len(TEXTS) / 5
    assert emb.encode([]).shape == (0, 384)
    one = emb.encode(["where does the user like to sit"])
    assert _min_cosine(one, reference.encode(["where does the user like to sit"])) >= 0.99999


class _Unrelated(Embedder):
    """Same model id, other vectors: the gate must refuse what it is compared with."""

    model_id, dim = PACKAGED_MODEL_ID, 384

    def _encode(self, texts, batch_size):
        rng = np.random.default_rng(len(texts))
        return rng.normal(size=(len(texts), self.dim)).astype(np.float32)


def test_the_parity_gate_refuses_vectors_that_differ() -> None:
    with pytest.raises(EmbedderError) as err:
        CudaEmbedder(device="cpu", dtype="float32", reference=_Unrelated())
    assert err.value.field == "dtype" and "parity" in str(err.value)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"dtype": "fp8"}, "dtype"),
        ({"max_batch_tokens": 0}, "max_batch_tokens"),
        ({"device": "tpu"}, "device"),
        ({"tokenize_threads": 0}, "tokenize_threads"),
    ],
)
def test_bad_options_name_the_field(kwargs, field) -> None:
    with pytest.raises(EmbedderError) as err:
        CudaEmbedder(**{"device": "cpu", **kwargs})
    assert err.value.field == field


def test_no_gpu_is_one_clear_error() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(EmbedderError) as err:
        open_embedder("default,device=cuda,dtype=float16", None, "batch")
    assert err.value.field == "device" and "no CUDA GPU" in str(err.value)


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "default,device=cuda,dtype=float16,max_batch_tokens=4096",
            {"device": "cuda", "dtype": "float16", "max_batch_tokens": 4096},
        ),
        ("default,device=cuda:1,dtype=BFloat16", {"device": "cuda:1", "dtype": "bfloat16"}),
        ("onnx,max_batch_tokens=2048", {"runtime": "onnx", "max_batch_tokens": 2048}),
    ],
)
def test_spec_options(text, expected) -> None:
    spec = EmbedderSpec.parse(text)
    assert {k: getattr(spec, k) for k in expected} == expected
    assert EmbedderSpec.parse(str(spec)) == spec


@pytest.mark.parametrize(
    "text, field",
    [
        ("default,dtype=float16", "embedder.dtype"),  # on CPU: not the GPU embedder
        ("default,runtime=torch,device=cuda,dtype=float16", "embedder.dtype"),
        ("default,device=cuda,dtype=half", "embedder.dtype"),
        ("default,runtime=torch,max_batch_tokens=64", "embedder.max_batch_tokens"),
        ("default,device=cuda,max_batch_tokens=0", "embedder.max_batch_tokens"),
    ],
)
def test_bad_spec_options(text, field) -> None:
    with pytest.raises(EmbedderError) as err:
        EmbedderSpec.parse(text)
    assert err.value.field == field


def test_backfill_flags_set_the_gpu_spec(tmp_path) -> None:
    config = BackfillConfig.from_flags(
        archive=str(tmp_path),
        store=str(tmp_path / "s"),
        gpus_per_embedder=1.0,
        embed_dtype="float16",
        embed_batch_tokens=32768,
        embed_batch_size=2048,
    )
    assert config.embedder == EmbedderSpec(device="cuda", dtype="float16", max_batch_tokens=32768)
    assert config.ray.embed_batch_size == 2048
    with pytest.raises(InvalidInput) as err:  # no GPU asked for: the flag is named
        BackfillConfig.from_flags(
            archive=str(tmp_path), store=str(tmp_path / "s"), embed_dtype="float16"
        )
    assert err.value.field == "--embed-dtype"


def test_embed_layout_fills_the_cores_or_the_gpus() -> None:
    spec = EmbedderSpec.parse("default")
    actors, opened = embed_layout(RayOptions(workers=4).resolved(), spec, {"CPU": 16.0})
    assert actors == 4 and opened.threads == 4  # 4 actors x 4 threads = the 16 cores
    kept = EmbedderSpec.parse("default,threads=2")
    assert embed_layout(RayOptions(workers=4).resolved(), kept, {"CPU": 16.0})[1].threads == 2
    gpu = EmbedderSpec.parse("default,device=cuda")
    opts = RayOptions(workers=8, gpus_per_embedder=0.5).resolved()
    assert embed_layout(opts, gpu, {"CPU": 32.0, "GPU": 2.0}) == (4, gpu)
    with pytest.raises(InvalidInput) as err:
        embed_layout(RayOptions(gpus_per_embedder=1.0).resolved(), gpu, {"CPU": 2.0})
    assert err.value.field == "--gpus-per-embedder"


def test_workers_default_to_half_the_cluster() -> None:
    assert RayOptions().resolved().workers is None  # sized when the job starts
    assert RayOptions().resolved().for_cluster({"CPU": 16.0}).workers == 8
    assert RayOptions(workers=3).resolved().for_cluster({"CPU": 16.0}).workers == 3
    assert [default_workers({"CPU": c}) for c in (0.0, 1.0, 2.0, 3.0, 16.0, 64.0)] == [
        1,
        1,
        1,
        1,
        8,
        32,
    ]
    spec = EmbedderSpec.parse("default")
    # Not given: 8 embed actors of 2 threads on 16 cores (the issue's --workers N/2).
    actors, opened = embed_layout(RayOptions().resolved(), spec, {"CPU": 16.0})
    assert (actors, opened.threads) == (8, 2)
    with pytest.raises(InvalidInput) as err:
        RayOptions(workers=0).check()
    assert err.value.field == "ray.workers"


def test_the_packer_hands_over_and_stops_when_the_consumer_gives_up(packed) -> None:
    """The CUDA path's packer thread and buffer ring, run with plain host buffers."""
    import threading

    import torch

    def ring() -> cuda_module._Ring:
        free = cuda_module.queue.Queue()
        for slot in range(cuda_module._IN_FLIGHT):
            free.put(slot)
        return cuda_module._Ring(
            [torch.empty(512, dtype=torch.int32) for _ in range(cuda_module._IN_FLIGHT)], free
        )

    before = threading.active_count()
    whole = ring()
    batches = []
    for b in packed._produce(TEXTS, None, whole):  # the consumer gives each buffer back
        batches.append(b)
        whole.free.put(b.slot)
    # Every row once, across batches of a 512-token budget.
    assert sorted(np.concatenate([b.rows for b in batches])) == list(range(len(TEXTS)))
    # The consumer fails after one batch (a device error): the packer must stop at once,
    # not when the exception's traceback is freed, and leave no thread behind.
    gen = packed._produce(TEXTS, None, ring())
    with pytest.raises(RuntimeError), cuda_module.contextlib.closing(gen) as started:
        next(iter(started))
        raise RuntimeError("CUDA out of memory")
    assert threading.active_count() <= before


class _RowsOnly(Embedder):
    """A third-party backend written for an int batch size."""

    model_id, dim = "rows-only", 3

    def _encode(self, texts, batch_size):
        return np.ones((len(range(0, len(texts), batch_size)) and len(texts), 3), np.float32)


def test_a_backend_without_own_batching_still_gets_an_int() -> None:
    assert _RowsOnly().encode(["a", "b"]).shape == (2, 3)
    assert CudaEmbedder.own_batching and not SentenceTransformerEmbedder.own_batching


def test_embed_actors_leave_the_vllm_engines_their_gpus(tmp_path) -> None:
    from mnemoray.pipeline.backfill import llm_gpus

    cfg = BackfillConfig(
        archive=str(tmp_path),
        store=str(tmp_path / "s"),
        summarizer="vllm",
        summarizer_options={"model": "m", "tensor_parallel_size": 2},
    )
    opts = RayOptions(gpus_per_embedder=0.5, llm_concurrency=1).resolved()
    assert llm_gpus(cfg, opts) == 2.0
    gpu = EmbedderSpec.parse("default,device=cuda")
    assert embed_layout(opts, gpu, {"GPU": 4.0}, reserved_gpus=2.0)[0] == 4
    with pytest.raises(InvalidInput) as err:
        embed_layout(opts, gpu, {"GPU": 2.0}, reserved_gpus=2.0)
    assert "vLLM" in str(err.value)


def test_the_forward_pass_never_asks_the_device_whether_rows_are_padded(
    packed, monkeypatch
) -> None:
    """A 2D mask makes transformers call ``mask.all()`` on every forward pass: on CUDA a
    host-device sync that stalls the copy/compute overlap. The 4D mask skips that check."""
    import transformers.masking_utils as masking

    def refuse(*args, **kwargs):
        raise AssertionError("transformers inspected the padding mask (a device sync)")

    monkeypatch.setattr(masking, "_ignore_bidirectional_mask_sdpa", refuse)
    got = packed.encode(TEXTS[:20])
    assert got.shape == (20, 384)
