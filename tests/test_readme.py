"""README examples match real runs (scripts/readme_examples.py), and the script itself."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from scripts import readme_examples as rx

FAKE = """# Title

<!-- example: echo one; echo 'two  ' -->
```text
$ echo one; echo 'two  '
stale
```

<!-- source: examples/compile_request.py -->
```python
old code
```

<!-- example ray: echo needs ray -->
```text
left alone
```

<!-- example: printf 'seconds: 1.50\\nrun report: runs/20261122T001919-64446377.json\\n' -->
<!-- example: pwd | sed -n 1p -->
```
```
"""


def test_regenerate_renders_commands_sources_and_normalises(tmp_path: Path) -> None:
    fresh = rx.regenerate(FAKE, skip=frozenset({"ray"}))
    source = (rx.ROOT / "examples" / "compile_request.py").read_text().rstrip("\n")
    assert fresh == FAKE.replace(
        "$ echo one; echo 'two  '\nstale", "$ echo one; echo 'two  '\none\ntwo"
    ).replace("old code", source).replace(
        "<!-- example: pwd | sed -n 1p -->\n```\n```",
        "<!-- example: pwd | sed -n 1p -->\n```\n"
        "$ printf 'seconds: 1.50\\nrun report: runs/20261122T001919-64446377.json\\n'\n"
        "seconds: <elapsed>\nrun report: runs/<run-id>.json\n\n$ pwd\n.\n```",
    )
    assert rx.regenerate(fresh, skip=frozenset({"ray"})) == fresh  # a fixed point
    only = rx.regenerate(FAKE, only=frozenset({"ray"}))
    assert "$ echo needs ray\nneeds ray" in only and "stale" in only


def test_the_run_date_is_normalised_and_a_fixed_date_kept(tmp_path: Path) -> None:
    today = datetime.now(timezone.utc).date().isoformat()
    text = f"recall: [{today}] user: hi\nrecall: [2026-01-11] user: old"
    assert (
        rx.normalise(text, tmp_path) == "recall: [<today>] user: hi\nrecall: [2026-01-11] user: old"
    )


def test_check_fails_with_a_diff_and_write_fixes_it(tmp_path: Path, capsys) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(FAKE)
    assert rx.main(["--check", "--skip", "ray", "--readme", str(readme)]) == 1
    assert "-stale" in capsys.readouterr().out
    assert rx.main(["--write", "--skip", "ray", "--readme", str(readme)]) == 0
    assert rx.main(["--check", "--skip", "ray", "--readme", str(readme)]) == 0


def test_a_failing_command_or_a_missing_block_is_an_error(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("<!-- example: exit 3 -->\n```\n```\n")
    assert rx.main(["--check", "--readme", str(readme)]) == 2
    readme.write_text("<!-- example: true -->\ntext\n")
    assert rx.main(["--check", "--readme", str(readme)]) == 2


def test_readme_examples_without_models_or_ray() -> None:
    assert rx.main(["--check", "--skip", "ray", "--skip", "slow"]) == 0


@pytest.mark.slow
def test_readme_examples_that_load_models() -> None:
    assert rx.main(["--check", "--only", "slow", "--skip", "ray"]) == 0


@pytest.mark.ray
@pytest.mark.slow
def test_readme_examples_on_ray() -> None:
    assert rx.main(["--check", "--only", "ray"]) == 0


def test_every_page_with_examples_has_some() -> None:
    # A page in PAGES whose examples were all removed would be checked for nothing.
    assert rx.README in rx.PAGES
    for page in rx.PAGES:
        assert rx.parse(page.read_text().splitlines()), f"{page} has no examples"
