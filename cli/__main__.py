"""``python -m cli``: the `mnemoray` command."""

from cli.main import run

run()
