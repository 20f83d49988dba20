"""A memory store location is a directory, parquet://DIR or lancedb://DIR; any other URL
is refused naming them, never made a directory of that name."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemoray.errors import ConfigError
from mnemoray.memory.store.protocol import absolute_location, open_backend, parse_location

SUPPORTED = "give a directory, parquet://DIR or lancedb://DIR"


@pytest.mark.parametrize(
    "location",
    ["postgresql://db.example/mem", "S3://bucket/mem", Path("postgresql://db.example/mem")],
    ids=["postgresql", "upper-case", "a-path-of-a-url"],
)
def test_an_unknown_scheme_is_refused_by_every_opener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, location: str | Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for opener in (parse_location, absolute_location, open_backend):
        with pytest.raises(ConfigError, match=f"is not supported here; {SUPPORTED}") as raised:
            opener(location)  # type: ignore[operator]
        assert raised.value.field == "store"
    assert list(tmp_path.iterdir()) == []


def test_our_schemes_and_paths_still_open(tmp_path: Path) -> None:
    assert parse_location(f"lancedb://{tmp_path}") == ("lancedb", tmp_path)
    assert parse_location(f"PARQUET://{tmp_path}") == ("parquet", tmp_path)
    assert absolute_location(f"lancedb://{tmp_path}") == f"lancedb://{tmp_path}"
    assert parse_location(tmp_path / "plain") == ("parquet", tmp_path / "plain")
    with pytest.raises(ConfigError, match="names no directory"):
        absolute_location("lancedb://")  # was the working directory
