"""When a server's background merge runs (``background_merge``), as plain numbers: the
settings read them without importing the merge (polars, FAISS)."""

DEFAULT_AFTER_SEGMENTS = 16  # small segments in one shard that start a merge
DEFAULT_SMALL_ROWS = 4096  # a segment under this many rows counts as small
DEFAULT_GRACE_S = 60.0  # replaced files are deleted this long after the merge
