"""How a replica micro-batches its queries for the in-process encoder: the wait a batch
may take for companions and the rows per encoder run inside a batch
(:class:`mnemoray.serve.ingress.MemoryIngress` applies them).
"""

from __future__ import annotations

from mnemoray.embedders.base import Embedder
from mnemoray.embedders.onnx import OnnxEmbedder

# Query micro-batching (``@serve.batch`` on ``MemoryIngress.embed_queries``): a batch costs less
# per query than single encodes, so batching pays under concurrency, while a fixed
# wait is pure latency for a lone client (figures: benchmarks/README.md, "Design
# measurements"). Serve forms the next batch while the
# previous one is still encoding (with max_concurrent_batches=1 it then waits), so a
# fixed window would cut the queue into many small batches. The wait therefore
# tracks the encoder (``MemoryIngress._batch_wait``):
# - encoder idle, no other query in flight: 0 (a lone client never waits);
# - encoder idle, others in flight: BATCH_WAIT_S, about one single-query encode:
#   enough to gather a burst, small against the latency budget;
# - encoder busy: until it is expected to be free (EMA of batch encode time minus
#   the time it has run, at least BATCH_WAIT_S, at most MAX_BATCH_WAIT_S), so the
#   queries that arrive meanwhile leave together as one batch.
# BATCH_MAX_SIZE 16: past it the per-query cost barely falls while a batch's latency
# keeps growing (padding to the longest query). Settings: batch_max_size,
# batch_wait_timeout_s.
#
# Inside a batch the encoder runs at most ``query_run_rows`` (6) queries at a time, the
# batch sorted by length: one run pads every query to the batch's longest (4-14 word
# queries: ~1.6x the tokens), several runs of similar lengths pad less, and on a CPU
# runtime a run of 5-6 short queries costs about what it costs per query in a run of 16
# (ONNX MiniLM: 8-16% less CPU per query for batches of 8-16; benchmarks/README.md,
# "Serve"). A vector differs from the one-run vector only by float rounding (~3e-8),
# as it already does with the batch's make-up.
#
# Where a batch is encoded (``encode_in_loop``, default on): on the event loop. While
# it encodes, arriving requests queue in front of the loop and then join the next
# batch together: larger batches than on the encoder thread at the same throughput,
# i.e. less CPU per query on a saturated machine, and a lone query costs the same
# either way. The thread
# variant keeps the loop free for other routes while a batch encodes (shorter tails
# for non-recall requests on a machine with spare cores).
BATCH_MAX_SIZE = 16
BATCH_WAIT_S = 0.002
MAX_BATCH_WAIT_S = 0.05


def query_run_rows(embedder: Embedder, batch: int, most: int) -> int:
    """Rows per encoder run for a micro-batch of ``batch`` queries (see top): at most
    ``most``, evened out (10 -> 5 + 5, not 6 + 4), for ONNX Runtime on CPU (where it was
    measured); any other embedder (torch, a GPU, a remote server: one call per run)
    takes the batch whole."""
    if not isinstance(embedder, OnnxEmbedder) or batch <= most:
        return batch
    return -(-batch // -(-batch // most))


__all__ = ["BATCH_MAX_SIZE", "BATCH_WAIT_S", "MAX_BATCH_WAIT_S", "query_run_rows"]
