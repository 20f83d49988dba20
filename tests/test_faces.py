"""Each package's ``__init__`` is its public face, and the only place that re-exports.

A face lists names (``__all__``) that resolve; a module that is not an ``__init__``
exports only what it defines, so every import names the module that defines the name.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INITS = sorted((ROOT / "mnemoray").rglob("__init__.py"))


def _package(init: Path) -> str:
    return ".".join(init.parent.relative_to(ROOT).parts)


@pytest.mark.parametrize("package", [_package(p) for p in INITS])
def test_every_face_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = getattr(module, "__all__", [])
    assert [n for n in names if not hasattr(module, n)] == []


def test_only_faces_re_export() -> None:
    bad = []
    for path in sorted((ROOT / "mnemoray").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        imported = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                listed = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
                bad += [f"{path.relative_to(ROOT)}: {n}" for n in listed if n in imported]
        if "noqa: F401" in source:
            bad.append(f"{path.relative_to(ROOT)}: an import kept unused (noqa: F401)")
    assert bad == [], "re-exported outside a package's __init__:\n" + "\n".join(bad)
