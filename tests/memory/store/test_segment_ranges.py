"""A segment's tenant ranges: the small-table path and the polars path agree, and both
refuse rows not sorted by tenant."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mnemoray.errors import StoreCorrupt
from mnemoray.memory.store import segment
from mnemoray.memory.store.segment import tenant_ranges


def _table(pairs: list[tuple[str, str]]) -> pa.Table:
    return pa.table({"app_name": [a for a, _ in pairs], "user_id": [u for _, u in pairs]})


SORTED = [("a", "u1"), ("a", "u1"), ("a", "u2"), ("b", "u1"), ("b", "u3"), ("b", "u3")]


def test_small_and_large_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    small = tenant_ranges(_table(SORTED))
    monkeypatch.setattr(segment, "SMALL_TABLE_ROWS", 0)
    assert tenant_ranges(_table(SORTED)) == small
    assert small == (
        {("a", "u1"): (0, 2), ("a", "u2"): (2, 3), ("b", "u1"): (3, 4), ("b", "u3"): (4, 6)},
        {"a": (0, 3), "b": (3, 6)},
    )
    assert tenant_ranges(_table([])) == ({}, {})


@pytest.mark.parametrize("small_rows", [512, 0])
def test_unsorted_rows_are_refused(monkeypatch: pytest.MonkeyPatch, small_rows: int) -> None:
    monkeypatch.setattr(segment, "SMALL_TABLE_ROWS", small_rows)
    with pytest.raises(StoreCorrupt, match="not sorted by app_name, user_id"):
        tenant_ranges(_table([("a", "u1"), ("a", "u2"), ("a", "u1")]))
    with pytest.raises(StoreCorrupt, match="not sorted by app_name$"):
        tenant_ranges(_table([("a", "u1"), ("b", "u1"), ("a", "u2")]))
