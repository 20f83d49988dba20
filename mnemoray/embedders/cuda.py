"""A sentence-transformers model fed to a GPU at the GPU's pace.

sentence-transformers on a GPU is bound by the host, not the device: it tokenises,
pads and converts on one Python thread, batch by batch, while the GPU waits. Here:

- texts are sorted by length and cut into slices that the fast tokenizer encodes on a
  thread pool (its Rust batch call releases the GIL), slices ahead of the GPU, so
  tokenising overlaps the forward passes; the Python work per slice is a few C-level
  passes (no per-row loops), so it holds the GIL only briefly;
- a slice is packed into batches by a token budget (rows x longest row), so a batch
  of short turns holds thousands of rows and padding stays small;
- each batch is written into a reused pinned host buffer and copied to the device
  without blocking, while the previous batch computes; the attention mask is built
  on the device from the row lengths;
- the transformer runs in float16 or bfloat16 only when that passes the parity gate
  (minimum cosine >= :data:`PARITY_MIN_COSINE` against the float32 sentence-transformers
  model on :data:`PARITY_TEXTS`); only then do its vectors carry the model's
  ``model_id``. ``dtype="auto"`` takes the first of float16, bfloat16 that passes and
  falls back to float32.

It also runs on ``device="cpu"`` (no pinned buffers, no streams): that is how the
packing, ordering and gate are tested on machines without a GPU. The resolver opens
it only for CUDA devices.
"""

from __future__ import annotations

import contextlib
import copy
import queue
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any

import numpy as np

from mnemoray.embedders.base import Embedder, EmbedderError
from mnemoray.embedders.onnx import PARITY_MIN_COSINE, PARITY_TEXTS, token_batches, verify_parity
from mnemoray.embedders.spec import DTYPES
from mnemoray.embedders.st_folder import StLayout, resolve_st_folder

_AUTO_ORDER = ("float16", "bfloat16")
# Padded tokens per forward pass: large enough that a 6-layer MiniLM batch keeps an
# H100 busy for milliseconds (launch overhead hidden), small enough for any GPU.
DEFAULT_BATCH_TOKENS = 65536
# Texts per tokenizer call on the pool: big enough to amortise the call, small enough
# that the first batch is ready soon.
_TOKENIZE_SLICE = 1024
_IN_FLIGHT = 3  # pinned buffers: one being filled, one being copied, one spare


@dataclass
class EncodeStats:
    """Running totals of one embedder (the backfill's run report reads them)."""

    texts: int = 0
    tokens: int = 0  # real tokens
    padded_tokens: int = 0  # tokens the device computed (rows x longest row)
    batches: int = 0
    device_s: float = 0.0  # time the device spent in forward passes (device events)
    wall_s: float = 0.0  # time inside encode()

    def as_dict(self) -> dict[str, float | int]:
        return {
            "texts": self.texts,
            "tokens": self.tokens,
            "padded_tokens": self.padded_tokens,
            "batches": self.batches,
            "device_s": round(self.device_s, 4),
            "wall_s": round(self.wall_s, 4),
        }


@dataclass
class _Ring:
    """One encode call's pinned buffers and the slots free to fill. Per call: after a
    failed call its packer may still write into them, so they are never reused."""

    buffers: list
    free: queue.Queue


@dataclass
class _Batch:
    rows: np.ndarray  # positions in the input
    ids: Any  # torch tensor (rows, width), int32, pinned on CUDA
    lengths: Any  # torch tensor (rows,), int32
    slot: int | None = None  # pinned buffer index to give back after the copy


def torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def check_device(device: str) -> None:
    """Raise :class:`EmbedderError` unless torch can run on ``device``."""
    import torch

    if device == "cpu":
        return
    if not device.startswith("cuda"):
        raise EmbedderError(f"expected cpu, cuda or cuda:N, got {device!r}", field="device")
    if not torch.cuda.is_available():
        raise EmbedderError(
            f"device {device!r} is not available: torch "
            f"{torch.__version__} sees no CUDA GPU (a CPU-only build, or no "
            f"driver); embed on cpu instead",
            field="device",
        )
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise EmbedderError(
            f"device {device!r} is not available: this machine has "
            f"{torch.cuda.device_count()} GPU(s)",
            field="device",
        )


class CudaEmbedder(Embedder):
    """The packaged MiniLM (or a local sentence-transformers folder) on a GPU.

    ``dtype``: ``auto`` | ``float32`` | ``float16`` | ``bfloat16``; a half precision
    that fails the parity gate is refused (``auto`` moves on to the next).
    ``max_batch_tokens``: padded tokens per forward pass. ``tokenize_threads``: the
    tokenizer pool (None: up to 8, at most the machine's cores).
    ``reference``: the float32 embedder the gate compares with (None: the
    sentence-transformers model on the same device, loaded for the gate and dropped).
    """

    own_batching = True  # batch_size None: packed by max_batch_tokens alone

    def __init__(
        self,
        model: str | Path | None = None,
        device: str = "cuda",
        dtype: str = "auto",
        max_batch_tokens: int = DEFAULT_BATCH_TOKENS,
        tokenize_threads: int | None = None,
        reference: Embedder | None = None,
    ) -> None:
        if dtype not in DTYPES:
            raise EmbedderError(f"one of {', '.join(DTYPES)}, got {dtype!r}", field="dtype")
        if (
            isinstance(max_batch_tokens, bool)
            or not isinstance(max_batch_tokens, int)
            or max_batch_tokens < 1
        ):
            raise EmbedderError(
                f"must be a positive integer, got {max_batch_tokens!r}", field="max_batch_tokens"
            )
        if tokenize_threads is not None and tokenize_threads < 1:
            raise EmbedderError(f"must be >= 1, got {tokenize_threads}", field="tokenize_threads")
        check_device(device)
        import os

        import torch
        from tokenizers import Tokenizer

        self.device = device
        self.max_batch_tokens = max_batch_tokens
        root, base_id = resolve_st_folder(model)
        layout = StLayout(root)
        self.max_seq_length = layout.max_seq_length
        self._lower = layout.do_lower_case
        self._tokenizer = Tokenizer.from_file(str(layout.tokenizer_file))
        self._tokenizer.no_padding()  # padded per batch here (the file may pad to 128)
        self._tokenizer.enable_truncation(max_length=layout.max_seq_length)
        # Without character offsets (tokenizers >= 0.20): a third faster, same ids.
        self._encode_batch = getattr(
            self._tokenizer, "encode_batch_fast", self._tokenizer.encode_batch
        )
        threads = tokenize_threads or max(1, min(8, os.cpu_count() or 1))
        self._pool = (
            ThreadPoolExecutor(threads, thread_name_prefix="mnemoray-tokenize")
            if threads > 1
            else None
        )
        self._cuda = device.startswith("cuda")
        self._torch_device = torch.device(device)
        fp32 = self._load_module(layout)
        self.dim = int(fp32.config.hidden_size)
        self.model_id = base_id
        self.stats = EncodeStats()
        self._lock = threading.Lock()  # one encode at a time: buffers and stream are shared
        self._spare: list | None = None  # pinned buffers of the last call that ended well
        self._copy_stream = torch.cuda.Stream(self._torch_device) if self._cuda else None

        if reference is None:
            from mnemoray.embedders.torch import SentenceTransformerEmbedder

            reference = SentenceTransformerEmbedder(model, device=device)
        elif reference.model_id != base_id:
            raise EmbedderError(
                f"model {reference.model_id!r} is not {base_id!r}", field="reference"
            )
        if dtype == "auto":  # half precision only on a GPU: on CPU it is slower
            candidates = (*(_AUTO_ORDER if self._cuda else ()), "float32")
        else:
            candidates = (dtype,)
        self.parity: dict[str, float] = {}
        for name in candidates:
            self._module = fp32 if name == "float32" else copy.deepcopy(fp32).to(torch_dtype(name))
            self.dtype = name
            # Batch None too: the token-budget batches every caller gets by default.
            self.parity[name] = verify_parity(
                self, reference, PARITY_TEXTS, batch_sizes=(1, 16, None)
            )
            if self.parity[name] >= PARITY_MIN_COSINE:
                break
        else:
            worst = self.parity[candidates[-1]]
            raise EmbedderError(
                f"{dtype} on {device} failed the parity check for {base_id!r}: minimum "
                f"cosine vs the float32 model {worst:.5f} < {PARITY_MIN_COSINE}; it would "
                f"change search results, so it is refused (use dtype=float32 or auto)",
                field="dtype",
            )
        if self._module is not fp32:
            del fp32
        self.parity_min_cosine = self.parity[self.dtype]
        self.stats = EncodeStats()  # the gate's own encodes are not work done

    def _load_module(self, layout: StLayout):
        import torch
        import transformers
        from transformers import AutoModel

        major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
        # `dtype` replaced `torch_dtype` in 4.56; always float32 here (the checkpoint may
        # be stored in half precision): half precision only through the gate.
        key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
        precision: dict[str, Any] = {key: torch.float32}  # the key's name depends on the version
        try:
            module = AutoModel.from_pretrained(
                str(layout.transformer_dir),
                local_files_only=True,
                attn_implementation="sdpa",
                **precision,
            )
        except Exception as exc:  # many loaders, many error types: name the model
            raise EmbedderError(
                f"could not load {layout.transformer_dir}: {exc}", field="model"
            ) from exc
        return module.eval().to(self._torch_device)

    # -- host side ---------------------------------------------------------------------
    def _slices(self, texts: list[str]) -> Iterator[tuple[np.ndarray, list]]:
        """(input positions, padded encodings) per slice, longest texts first; the pool
        tokenises slices ahead of the caller."""
        if self._lower:
            texts = [t.lower() for t in texts]
        # Characters stand in for tokens here: slices of similar length pad little.
        chars = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        order = np.argsort(-chars, kind="stable")
        parts = [order[i : i + _TOKENIZE_SLICE] for i in range(0, len(order), _TOKENIZE_SLICE)]

        def tokenize(part: np.ndarray) -> list:
            return self._encode_batch([texts[i] for i in part])

        if self._pool is None or len(parts) == 1:
            for part in parts:
                yield part, tokenize(part)
            return
        # A bounded window ahead: a million texts must not all sit tokenised in memory.
        ahead: deque = deque()
        rest = iter(parts)
        for part in islice(rest, 2 * self._pool._max_workers):
            ahead.append((part, self._pool.submit(tokenize, part)))
        while ahead:
            part, future = ahead.popleft()
            following = next(rest, None)
            if following is not None:
                ahead.append((following, self._pool.submit(tokenize, following)))
            yield part, future.result()

    def _ring(self) -> _Ring:
        import torch

        buffers = self._spare
        self._spare = None
        if buffers is None:
            size = max(self.max_batch_tokens, self.max_seq_length)
            buffers = [torch.empty(size, dtype=torch.int32).pin_memory() for _ in range(_IN_FLIGHT)]
        free: queue.Queue[int] = queue.Queue()
        for slot in range(_IN_FLIGHT):
            free.put(slot)
        return _Ring(buffers, free)

    @staticmethod
    def _buffer(ring: _Ring | None, rows: int, width: int):
        """(slot, a rows x width int32 host buffer): pinned from ``ring`` on CUDA."""
        import torch

        if ring is None:
            return None, torch.empty((rows, width), dtype=torch.int32)
        slot = ring.free.get()  # waits until the device has copied that buffer out
        flat = ring.buffers[slot]
        if rows * width > flat.numel():  # one row longer than the budget
            flat = ring.buffers[slot] = torch.empty(rows * width, dtype=torch.int32).pin_memory()
        return slot, flat[: rows * width].view(rows, width)

    def _batches(
        self,
        texts: list[str],
        batch_size: int | None,
        stop: threading.Event | None = None,
        ring: _Ring | None = None,
    ) -> Iterator[_Batch]:
        import torch

        max_rows = batch_size or len(texts)
        for positions, encodings in self._slices(texts):
            lengths = np.fromiter(map(len, encodings), dtype=np.int32, count=len(encodings))
            # Every id of the slice in one flat array (C-level passes, no per-row loop).
            flat = np.fromiter(
                chain.from_iterable(e.ids for e in encodings),
                dtype=np.int32,
                count=int(lengths.sum()),
            )
            starts = np.cumsum(lengths) - lengths
            self.stats.tokens += len(flat)
            order = np.argsort(-lengths, kind="stable")
            for rows in token_batches(order, lengths, max_rows, self.max_batch_tokens):
                if stop is not None and stop.is_set():  # the consumer gave up
                    return
                row_lengths = lengths[rows]
                width = max(1, int(row_lengths[0]))
                columns = np.arange(width, dtype=np.int32)
                valid = columns[None, :] < row_lengths[:, None]
                slot, buffer = self._buffer(ring, len(rows), width)
                padded = buffer.numpy()
                padded[:] = 0
                padded[valid] = flat[(starts[rows][:, None] + columns[None, :])[valid]]
                yield _Batch(
                    rows=positions[rows],
                    ids=buffer,
                    lengths=torch.from_numpy(row_lengths),
                    slot=slot,
                )

    # -- device side -------------------------------------------------------------------
    def _forward(self, ids, lengths):
        import torch

        width = ids.shape[1]
        mask = torch.arange(width, device=ids.device)[None, :] < lengths[:, None]
        # A ready 4D mask (True: attend; SDPA broadcasts it over heads and queries) is used
        # as is. A 2D one makes transformers ask whether any token is padded
        # (``mask.all()``): a host-device sync on every forward pass.
        hidden = self._module(input_ids=ids, attention_mask=mask[:, None, None, :])[0]
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        # Sum in float32: half-precision sums of 256 tokens lose digits.
        summed = (hidden * weights).sum(dim=1, dtype=torch.float32)
        pooled = summed / lengths.to(torch.float32).clamp(min=1).unsqueeze(-1)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    def _encode(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        import torch

        with self._lock, torch.inference_mode():
            if not self._cuda:
                return self._encode_on(texts, batch_size)
            with torch.cuda.device(self._torch_device):
                return self._encode_on(texts, batch_size)

    def _encode_on(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        import torch

        started = time.perf_counter()
        timings: list = []
        rows: list[np.ndarray] = []
        vectors: list = []
        ring = self._ring() if self._cuda else None
        # closing(): on an error the packer stops now, not when the traceback is freed.
        with contextlib.closing(self._produce(texts, batch_size, ring)) as batches:
            for batch in batches:
                ids, lengths = self._to_device(batch, ring)
                if self._cuda:
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    vectors.append(self._forward(ids, lengths))
                    end.record()
                    timings.append((start, end))
                else:
                    t0 = time.perf_counter()
                    vectors.append(self._forward(ids, lengths))
                    timings.append(time.perf_counter() - t0)
                rows.append(batch.rows)
                self.stats.padded_tokens += int(ids.shape[0] * ids.shape[1])
                self.stats.batches += 1
        # One copy back for the whole call, then the input order restored on the host.
        host = torch.cat(vectors).to("cpu").numpy()
        out = np.empty_like(host)
        out[np.concatenate(rows)] = host
        if self._cuda:
            self.stats.device_s += sum(s.elapsed_time(e) for s, e in timings) / 1e3
        else:
            self.stats.device_s += sum(timings)
        self.stats.texts += len(texts)
        self.stats.wall_s += time.perf_counter() - started
        if ring is not None:
            self._spare = ring.buffers  # every slot came back: the next call reuses them
        return out

    def _to_device(self, batch: _Batch, ring: _Ring | None):
        """The batch's ids (int64) and lengths on the device; its pinned buffer freed."""
        import torch

        if ring is None:
            return batch.ids.long(), batch.lengths
        with torch.cuda.stream(self._copy_stream):
            ids = batch.ids.to(self._torch_device, non_blocking=True)
            lengths = batch.lengths.to(self._torch_device, non_blocking=True)
            copied = torch.cuda.Event()
            copied.record(self._copy_stream)
        compute = torch.cuda.current_stream()
        compute.wait_event(copied)
        ids.record_stream(compute)
        lengths.record_stream(compute)
        # The copy engine is idle between batches, so this waits microseconds, while the
        # previous batch still computes; then the pinned buffer can be refilled.
        copied.synchronize()
        if batch.slot is not None:
            ring.free.put(batch.slot)
        return ids.long(), lengths

    def _produce(
        self, texts: list[str], batch_size: int | None, ring: _Ring | None
    ) -> Generator[_Batch, None, None]:
        """The packed batches, built on a thread while the caller runs the device."""
        if ring is None:
            yield from self._batches(texts, batch_size)
            return
        ready: queue.Queue = queue.Queue(maxsize=_IN_FLIGHT - 1)
        stop = threading.Event()
        done = object()

        def hand_over(item: object) -> None:
            while not stop.is_set():  # a consumer that gave up takes nothing more
                try:
                    ready.put(item, timeout=0.1)
                    return
                except queue.Full:
                    continue

        def fill() -> None:
            try:
                for batch in self._batches(texts, batch_size, stop, ring):
                    hand_over(batch)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
                hand_over(exc)
            hand_over(done)

        packer = threading.Thread(target=fill, name="mnemoray-pack", daemon=True)
        packer.start()
        try:
            while (item := ready.get()) is not done:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            for slot in range(_IN_FLIGHT):  # unblock a packer waiting for a buffer
                ring.free.put(slot)
            packer.join(timeout=5.0)


__all__ = ["DEFAULT_BATCH_TOKENS", "CudaEmbedder", "EncodeStats", "check_device", "torch_dtype"]
