#!/usr/bin/env python3
"""Regenerate (``--write``) or verify (``--check``) the README's examples from real runs.

The pages with examples are README.md, docs/context.md and docs/memory.md (``PAGES``);
``--page FILE`` (repeatable) picks others. An example in a page is an HTML comment
naming a command, directly followed by a fenced block holding what that command printed::

    <!-- example: mnemoray recall --store store --app pets_app --user maya "parrot" -->
    ```text
    $ mnemoray recall --store store --app pets_app --user maya "parrot"
    ...its output...
    ```

Several ``example`` comments in a row share one block (their outputs in order, each
after its ``$ command`` line). Tags between ``example`` and the colon say what a
command needs: ``<!-- example ray: ... -->`` starts Ray, ``slow`` loads a model;
``--skip ray --skip slow`` leaves those out (their blocks are kept as they are),
``--only ray`` runs just those. A `` | sed ...`` (or awk, grep) at the end of a command
abridges the output (a filter must read all its input: commands run with
``pipefail``); the ``$`` line shows the command without it.
``<!-- source: examples/x.py -->`` followed by a fenced block embeds that file
verbatim, so code shown in the README is the code that ran.

Commands run in page order with bash, in one fresh temporary directory per page (so
relative paths such as ``--store store`` are shared by later commands), with ``examples/``
linked into it and this checkout's ``.venv/bin`` first on PATH. Output is normalised
before it is compared: the temporary directory, timings, run ids and trailing spaces.

    python scripts/readme_examples.py --check [--skip ray --skip slow]   # exit 1 + diff
    python scripts/readme_examples.py --write                             # make readme
    python scripts/readme_examples.py --check --page docs/memory.md       # one page
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Every page whose examples are real runs (each in its own fresh directory).
PAGES = [README, ROOT / "docs" / "context.md", ROOT / "docs" / "memory.md"]

MARKER = re.compile(r"^<!-- (example|source)((?: [a-z]+)*): (.+?) -->\s*$")
FENCE = re.compile(r"^(```+|~~~+)")

# What changes from run to run, and what the README shows instead.
VOLATILE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bseconds: [0-9.]+"), "seconds: <elapsed>"),
    (re.compile(r"\b(sessions/s|memories/s): [0-9.]+"), r"\1: <rate>"),
    (re.compile(r"\b(\d{8}T\d{6})-[0-9a-f]{8}\b"), "<run-id>"),
    (re.compile(r" +\d+( ?us)$"), r" <t>\1"),  # padding varies with the width too
    # uuid-based session / event ids (a prefix hash is content-derived: kept).
    (re.compile(r"(?<!prefix_hash )\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{16}\b"), "<id>"),
    # The demo's naive count includes those random ids.
    (re.compile(r"naive append-everything: \d+, [0-9.]+x"), "naive append-everything: <n>"),
    (re.compile(r"\b\d+(\.\d+)? ms\b"), "<ms>"),
    (re.compile(r'"took_ms": [0-9.e-]+'), '"took_ms": <ms>'),
    (re.compile(r'"created_at": [0-9.e+]+'), '"created_at": <time>'),
    (re.compile(r"\bin [0-9.]+ s\b"), "in <elapsed>"),
    (re.compile(r"\((\d+\.\d+) s\b"), "(<elapsed> s"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<job-id>"),
    # Background compaction: how many windows land depends on when the worker runs.
    (
        re.compile(r"^\d+ compaction events landed in the background, covering \d+ of"),
        "<n> compaction events landed in the background, covering <n> of",
    ),
    (
        re.compile(
            r"total_tokens \d+, of which history \d+: \d+ summaries \(compression "
            r"[0-9.]+x\) \+ \d+ raw events"
        ),
        "total_tokens <n>, of which history <n>: <n> summaries (compression <r>x) + <n> raw events",
    ),
    (re.compile(r"memories_added \d+"), "memories_added <n>"),
]


class ExampleError(Exception):
    """A command failed, or README.md is malformed around an example."""


@dataclass
class Block:
    """One fenced block the script owns: lines [start, end) of the README (fences
    excluded) and the commands (or the source file) that produce it."""

    kind: str  # "example" | "source"
    start: int
    end: int
    commands: list[tuple[str, frozenset[str]]] = field(default_factory=list)

    @property
    def tags(self) -> frozenset[str]:
        return frozenset().union(*(tags for _, tags in self.commands))


def parse(lines: Sequence[str]) -> list[Block]:
    """The example and source blocks of ``lines`` (the README split into lines)."""
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        kind, first = m.group(1), i
        commands: list[tuple[str, frozenset[str]]] = []
        while i < len(lines) and (m := MARKER.match(lines[i])):
            if m.group(1) != kind or (kind == "source" and commands):
                raise ExampleError(f"line {i + 1}: one source, or examples only, per block")
            commands.append((m.group(3).strip(), frozenset(m.group(2).split())))
            i += 1
        if i >= len(lines) or not (fence := FENCE.match(lines[i])):
            raise ExampleError(
                f"line {first + 1}: an {kind} comment must be followed directly by a fenced block"
            )
        close = next(
            (j for j in range(i + 1, len(lines)) if lines[j].strip() == fence.group(1)), None
        )
        if close is None:
            raise ExampleError(f"line {i + 1}: unclosed fenced block")
        blocks.append(Block(kind, i + 1, close, commands))
        i = close + 1
    return blocks


ABRIDGING = ("sed", "awk", "grep", "head", "tail")


def split_filter(command: str) -> str:
    """The command as shown: without a trailing `` | filter`` (outside quotes) that only
    abridges the output (``sed``, ``awk``, ...); other pipes stay visible."""
    quote = None
    for pos, ch in enumerate(command):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif (
            ch == "|"
            and command[pos - 1 : pos + 2] == " | "
            and command[pos + 2 :].split(maxsplit=1)[0] in ABRIDGING
        ):
            return command[:pos].rstrip()
    return command


def run_dates() -> set[date]:
    """The days an example run can stamp on what it writes "now": today in UTC and
    local time, and the day before (a run that crosses midnight)."""
    days = {datetime.now(timezone.utc).date(), datetime.now().date()}
    return days | {day - timedelta(days=1) for day in days}


def normalise(text: str, workdir: Path) -> str:
    for root in {str(workdir), os.path.realpath(workdir)}:
        text = text.replace(root + os.sep, "").replace(root, ".")
    # A memory written during the run carries the run's date; fixed dates stay.
    for day in run_dates():
        text = text.replace(f"[{day.isoformat()}]", "[<today>]")
    lines = []
    for line in text.splitlines():
        for pattern, repl in VOLATILE:
            line = pattern.sub(repl, line)
        lines.append(line.rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def run_command(command: str, workdir: Path, timeout: float) -> str:
    venv_bin = ROOT / ".venv" / "bin"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
        "TOKENIZERS_PARALLELISM": "false",
        "COLUMNS": "100",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PATH": os.pathsep.join([str(venv_bin), os.environ.get("PATH", "")]),
    }
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise ExampleError(f"`{command}` exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def render(block: Block, workdir: Path, timeout: float) -> list[str]:
    if block.kind == "source":
        path = ROOT / block.commands[0][0]
        return path.read_text().rstrip("\n").splitlines()
    parts = []
    for command, _ in block.commands:
        out = normalise(run_command(command, workdir, timeout), workdir)
        parts.append(f"$ {split_filter(command)}" + (f"\n{out}" if out else ""))
    return "\n\n".join(parts).splitlines()


Key = tuple[str, tuple[str, ...]]  # (kind, commands): what a block shows


def key_of(block: Block) -> Key:
    return block.kind, tuple(command for command, _ in block.commands)


def render_all(
    text: str,
    skip: frozenset[str] = frozenset(),
    only: frozenset[str] = frozenset(),
    timeout: float = 600.0,
    log: Callable[[str], None] = lambda _: None,
) -> dict[Key, list[str]]:
    """The fresh content of every block of ``text`` (a README), run in README order,
    but of those with a tag in ``skip`` or (when ``only`` is given) none in ``only``."""
    rendered: dict[Key, list[str]] = {}
    workdir = Path(tempfile.mkdtemp(prefix="mnemoray-readme-"))
    try:
        (workdir / "examples").symlink_to(ROOT / "examples")
        for block in parse(text.splitlines()):
            if block.tags & skip or (only and not block.tags & only):
                continue
            log(f"{block.kind}: " + "; ".join(c for c, _ in block.commands))
            rendered[key_of(block)] = render(block, workdir, timeout)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return rendered


def apply(text: str, rendered: dict[Key, list[str]]) -> str:
    """``text`` with each block that ``rendered`` holds replaced by its fresh content."""
    lines = text.splitlines()
    out: list[str] = []
    pos = 0
    for block in parse(lines):
        fresh = rendered.get(key_of(block))
        if fresh is not None:
            out += lines[pos : block.start] + fresh
            pos = block.end
    out += lines[pos:]
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def regenerate(
    text: str,
    skip: frozenset[str] = frozenset(),
    only: frozenset[str] = frozenset(),
    timeout: float = 600.0,
    log: Callable[[str], None] = lambda _: None,
) -> str:
    """``text`` with its blocks re-rendered from real runs (see ``render_all``)."""
    return apply(text, render_all(text, skip, only, timeout, log))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--check",
        action="store_true",
        help="exit 1 with a diff if a page differs from fresh runs",
    )
    mode.add_argument("--write", action="store_true", help="rewrite the pages' example blocks")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="TAG",
        help="leave out examples with this tag (ray, slow); repeatable",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="TAG",
        help="run only examples with this tag; repeatable",
    )
    parser.add_argument(
        "--page",
        "--readme",
        dest="pages",
        type=Path,
        action="append",
        metavar="FILE",
        help="a page with examples (repeatable; default: README.md and the docs in PAGES)",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)

    log = (lambda msg: print(msg, file=sys.stderr)) if args.verbose else (lambda _: None)
    status = 0
    for page in args.pages or PAGES:
        status = max(status, _one_page(page, args, log))
    return status


def _one_page(page: Path, args: argparse.Namespace, log: Callable[[str], None]) -> int:
    """``--check`` or ``--write`` one page: 0 as it should be (or rewritten), 1 drifted,
    2 a command failed or the page is malformed."""
    text = page.read_text()
    log(f"== {page}")
    try:
        rendered = render_all(text, frozenset(args.skip), frozenset(args.only), args.timeout, log)
    except (ExampleError, subprocess.TimeoutExpired) as exc:
        print(f"readme_examples: {page.name}: {exc}", file=sys.stderr)
        return 2
    if args.write:
        # Applied to the file as it is now: edits made while the commands ran are kept.
        current = page.read_text()
        fresh = apply(current, rendered)
        if fresh != current:
            page.write_text(fresh)
            print(f"updated {page}")
        return 0
    fresh = apply(text, rendered)
    if fresh == text:
        return 0
    sys.stdout.writelines(
        difflib.unified_diff(
            text.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            f"{page.name} (committed)",
            f"{page.name} (fresh run)",
        )
    )
    print(f"\n{page.name} drifted from real runs: run `make readme`.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
