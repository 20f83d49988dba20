"""The layers import one way: the Ray-free core <- mnemoray.pipeline, mnemoray.serve <-
mnemoray.jobs <- mnemoray.cli (the core is every mnemoray module outside those four).

Read from the source (every import statement, lazy ones inside functions and
``TYPE_CHECKING`` blocks included), so a violation fails here before it ships.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("pipeline", "serve", "jobs", "cli")  # the application subpackages of mnemoray
# What each layer may import of the others ("core": mnemoray outside the four above).
ALLOWED = {
    "core": set(),
    "pipeline": {"core"},
    "serve": {"core"},
    "jobs": {"core", "pipeline", "serve"},
    "cli": {"core", "pipeline", "serve", "jobs"},
}


def _layer(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "mnemoray":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in APPS else "core"


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "mnemoray").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path, module: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")[: -node.level] if path.name != "__init__.py" \
                    else module.split(".")[: len(module.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)
    return found


def test_packages_import_only_downward() -> None:
    bad = []
    for module, path in _modules().items():
        layer = _layer(module)
        assert layer is not None
        for name in _imports(path, module):
            other = _layer(name)
            if other is not None and other != layer and other not in ALLOWED[layer]:
                bad.append(f"{module} imports {name}")
    assert not bad, "imports that run upward:\n" + "\n".join(sorted(bad))


def test_no_import_cycles_between_modules() -> None:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        deps = set()
        for name in _imports(path, module):
            # "a.b.c" may be module a.b.c or name c in module a.b: keep the longest module.
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                deps.add(name)
        graph[module] = deps
    # Tarjan's strongly connected components: any with more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)
