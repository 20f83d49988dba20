"""The run log (``benchmarks/results/HISTORY.md``): one section per benchmark, replaced
by the benchmark's next run."""

from __future__ import annotations

import re
from pathlib import Path


def update_section(path: Path, heading: str, section: str) -> None:
    """Put ``section`` in place of the one whose ``## `` heading starts with
    ``heading`` (up to the next ``## `` heading), or append it."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^## {re.escape(heading)}.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")
