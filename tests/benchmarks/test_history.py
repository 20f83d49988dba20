"""The run log's sections: a benchmark's next run replaces its own section only."""

from __future__ import annotations

from benchmarks.history import update_section


def test_a_section_is_replaced_in_place_or_appended(tmp_path):
    log = tmp_path / "HISTORY.md"
    log.write_text("# Benchmarks\n\n## Alpha (`a.py`)\n\nold\n\n## Beta\n\nkept\n")
    update_section(log, "Alpha", "## Alpha (`a.py`)\n\nnew\n")
    text = log.read_text()
    assert "old" not in text and text.index("new") < text.index("## Beta\n\nkept")
    update_section(log, "Gamma", "## Gamma\n\nfirst\n")
    assert log.read_text().endswith("## Beta\n\nkept\n\n## Gamma\n\nfirst\n")
    # A heading is matched literally, not as a pattern.
    update_section(log, "Al.ha", "## Al.ha\n\nother\n")
    assert "new" in log.read_text() and log.read_text().count("## Al") == 2
