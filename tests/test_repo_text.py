"""What the repository's text says: no references to internal planning documents, a
docs index that lists every page, and links between pages that resolve.

Planning references ("seed 003", "issue 11", "the seed's ...") mean nothing to a user or
to a reader of the code: a comment, docstring, help string or page says why on its own.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

PLANNING = re.compile(
    r"\bseeds? 0\d\d\b"  # seed 000, seed 003, seeds 000 and 003
    r"|\bseed0\d"
    r"|\bseed_0\d"
    r"|\bseed's\b|\bseeds'"  # the seed's / the seeds' (a planning document)
    r"|\bissues? \d+\b"  # issue 11, issues 10 and 12
    r"|\(issue #?\d+",
    re.IGNORECASE,
)
# Text files under these roots (and these files) must not cite planning.
SCANNED_DIRS = ("mnemoray", "docs", "tests", "benchmarks", "scripts", "examples", "deploy")
SCANNED_FILES = (
    "README.md",
    "benchmarks/README.md",
    "benchmarks/results/HISTORY.md",
    "pyproject.toml",
    "Makefile",
)
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".js", ".html", ".css", ".txt", ".json"}
# Where a pattern is not a planning reference: a link to an upstream project's tracker.
ALLOWED = re.compile(r"github\.com/[^\s)]+/issues/\d+")


def _texts() -> list[Path]:
    paths = [ROOT / name for name in SCANNED_FILES]
    for top in SCANNED_DIRS:
        paths += [
            p
            for p in (ROOT / top).rglob("*")
            if p.is_file() and p.suffix in SUFFIXES and "results" not in p.parts
        ]
    return sorted(set(paths))


def planning_references(text: str) -> list[str]:
    return [m.group(0) for m in PLANNING.finditer(ALLOWED.sub("", text))]


def test_the_pattern_finds_planning_and_nothing_else() -> None:
    found = planning_references(
        "seed 000; (seed 003's matrix); Seed 004 outcomes; issue 11's set; (issue 12); "
        "the seed's words; seeds' notes"
    )
    assert len(found) == 7, found
    assert not planning_references(
        "torch.manual_seed(0); random seed 7; seed=42; a known issue; see "
        "https://github.com/ray-project/ray/issues/53727; seeded data"
    )


def test_no_planning_references() -> None:
    this = Path(__file__).resolve()
    bad = []
    for path in _texts():
        if path.resolve() == this:
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for ref in planning_references(line):
                bad.append(f"{path.relative_to(ROOT)}:{n}: {ref!r}: {line.strip()[:100]}")
    assert bad == [], "\n".join(bad)


def test_docs_index_lists_every_page() -> None:
    index = (DOCS / "index.md").read_text()
    linked = set(re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", index))
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert pages - linked == set(), "docs/index.md misses these pages"


def test_relative_links_resolve() -> None:
    bad = []
    for page in [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            path = target.split("#", 1)[0]
            if not path or re.match(r"[a-z]+:", path):
                continue
            if not (page.parent / path).exists():
                bad.append(f"{page.relative_to(ROOT)}: {target}")
    assert bad == [], "\n".join(bad)


PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted(DOCS.glob("*.md"))]
# A source path the pages name (not a filesystem path such as /var/lib/mnemoray/store).
SOURCE_PATH = re.compile(r"(?<![\w/.-])mnemoray/[\w/]+(?:\.py|\.yaml)?")
PAGE_IMPORT = re.compile(r"^\s*from (mnemoray[\w.]*) import \(?([\w, ]+)\)?", re.MULTILINE)
PAGE_IMPORT_BLOCK = re.compile(
    r"^\s*from (mnemoray[\w.]*) import \(\n((?:\s+\w+,?\n)+)\s*\)", re.MULTILINE
)


def test_pages_name_source_paths_that_exist() -> None:
    missing = [
        f"{page.relative_to(ROOT)}: {found}"
        for page in PAGES
        for found in SOURCE_PATH.findall(page.read_text(encoding="utf-8"))
        if not (ROOT / found.rstrip("/")).exists()
    ]
    assert missing == []


def test_pages_import_from_package_faces() -> None:
    """What a reader copies imports from a package's public face, names it exports."""
    import importlib

    bad = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        found = [(m, n) for m, n in PAGE_IMPORT.findall(text)]
        found += [(m, n) for m, n in PAGE_IMPORT_BLOCK.findall(text)]
        for module, names in found:
            where = f"{page.relative_to(ROOT)}: from {module}"
            if not (ROOT / module.replace(".", "/") / "__init__.py").exists():
                bad.append(f"{where} (a module, not a package's face)")
                continue
            face = importlib.import_module(module)
            exported = set(getattr(face, "__all__", ()))
            bad += [
                f"{where} import {n} (not in its __all__)"
                for n in (x.strip() for x in names.split(","))
                if n and n not in exported
            ]
    assert bad == []
