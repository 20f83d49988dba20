"""The layers import one way: mnemoray (Ray-free core) <- pipeline, serve <- jobs <- cli.

Read from the source (every import statement, lazy ones inside functions and
``TYPE_CHECKING`` blocks included), so a violation fails here before it ships.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("mnemoray", "pipeline", "serve", "jobs", "cli")
# What each package may import of the others.
ALLOWED = {
    "mnemoray": set(),
    "pipeline": {"mnemoray"},
    "serve": {"mnemoray"},
    "jobs": {"mnemoray", "pipeline", "serve"},
    "cli": {"mnemoray", "pipeline", "serve", "jobs"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
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
        pkg = module.split(".")[0]
        for name in _imports(path, module):
            other = name.split(".")[0]
            if other in PACKAGES and other != pkg and other not in ALLOWED[pkg]:
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
