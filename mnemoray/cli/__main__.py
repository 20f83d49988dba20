"""``python -m mnemoray.cli``: the `mnemoray` command."""

from mnemoray.cli.main import run

run()
