"""The backfill as a Ray job: the `mnemoray backfill` command, same flags.

    ray job submit --address http://HEAD:8265 --working-dir . -- \\
        python -m jobs.backfill --archive /data/archive --store /data/store --workers 8

Under `ray job submit` RAY_ADDRESS is set, so the job joins that cluster; run
directly, it starts a local Ray instance like the CLI does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    import typer

    from mnemoray.cli import backfill_cmd

    job = typer.Typer(add_completion=False)
    job.command()(backfill_cmd)  # one command: its flags are the program's flags
    job(args=list(sys.argv[1:] if argv is None else argv), prog_name="python -m jobs.backfill")


if __name__ == "__main__":
    main()
