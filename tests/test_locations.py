"""The one rule every local opener applies: a URL-looking location is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemoray.errors import ConfigError
from mnemoray.locations import local_location, shown, url_scheme


@pytest.mark.parametrize(
    ("location", "scheme"),
    [
        ("postgresql://h/db", "postgresql"),
        ("postgresql:/h/db", "postgresql"),  # what Path("postgresql://h/db") prints
        ("MySQL+pymysql://h/db", "mysql+pymysql"),
        ("/var/lib/sessions.db", None),
        ("relative/sessions.db", None),
        (":memory:", None),
        ("C:/data/sessions.db", None),  # a Windows drive, not a scheme
        ("notes:today.db", None),
    ],
)
def test_url_scheme(location: str, scheme: str | None) -> None:
    assert url_scheme(location) == scheme
    assert url_scheme(Path(location)) == scheme


def test_local_location_refuses_all_but_the_openers_schemes() -> None:
    with pytest.raises(ConfigError) as raised:
        local_location("redis://:pw@cache:6379/0", field="jobs", supported="a file path")
    assert (
        str(raised.value)
        == "jobs: redis://***@cache:6379/0 is not supported here; give a file path"
    )
    assert local_location(Path("a/b.db"), field="f", supported="x") == "a/b.db"
    assert local_location("lancedb://d", field="f", supported="x", schemes=("lancedb",))
    with pytest.raises(ConfigError):  # a known scheme, but folded by Path: not ours to parse
        local_location("lancedb:/d", field="f", supported="x", schemes=("lancedb",))


def test_shown_hides_credentials_only() -> None:
    assert shown("postgresql://maya:hunter2@db/x") == "postgresql://***@db/x"
    assert shown("postgresql://db/x?password=hunter2") == "postgresql://db/x?***"
    assert shown("/srv/what?.db") == "/srv/what?.db"
    assert shown("postgresql://db/x") == "postgresql://db/x"
    assert shown("/srv/a@b/sessions.db") == "/srv/a@b/sessions.db"
