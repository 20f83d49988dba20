"""The packages import one way, in the order of ``LAYERS`` (docs/architecture.md, "Layers").

Each module belongs to the layer of its longest listed prefix and may import only its own
layer and those below it; ``pipeline`` and ``serve`` share a rank and never import each
other. Read from the source (every import statement, lazy ones inside functions and
``TYPE_CHECKING`` blocks included), so a violation fails here before it ships.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top. A tuple is one rank whose members do not import each other.
LAYERS: list[tuple[str, ...]] = [
    # the ground floor: errors, limits, tokens, text, crash-safe files, small utilities
    ("mnemoray",),
    ("mnemoray.temporal",),
    ("mnemoray.sessions",),
    ("mnemoray.artifacts",),
    ("mnemoray.embedders",),
    ("mnemoray.summarizers",),
    ("mnemoray.compaction",),
    # the compiler declares the ports it needs (compiler/services.py); memory implements them
    ("mnemoray.compiler",),
    ("mnemoray.compiler.demo_session",),
    ("mnemoray.memory.records",),
    ("mnemoray.schemas",),
    ("mnemoray.client",),
    # the entity graph as a model; the store persists it (memory/store/graph/)
    ("mnemoray.graph",),
    ("mnemoray.memory.store",),
    ("mnemoray.memory.recall",),
    ("mnemoray.profiles",),
    ("mnemoray.memory.service",),
    ("mnemoray.memory.ingest",),
    ("mnemoray.memory.hygiene",),
    ("mnemoray.memory",),  # the package's public face
    ("mnemoray.settings",),
    ("mnemoray.adk",),
    ("mnemoray.backfill",),
    ("mnemoray.mcp",),
    ("mnemoray.ui",),
    ("mnemoray.http",),
    # starting (or joining) Ray, loopback only: the one module below the edges that imports it
    ("mnemoray.ray_local",),
    ("mnemoray.pipeline", "mnemoray.serve"),
    ("mnemoray.jobs",),
    ("mnemoray.cli",),
]
# Ray is imported only from these layers up (the rest runs in a notebook or a worker alike).
RAY_FROM = "mnemoray.ray_local"

RANK = {prefix: rank for rank, group in enumerate(LAYERS) for prefix in group}


def layer_of(name: str) -> str | None:
    """The layer prefix a module (or a name inside one) belongs to; None outside mnemoray."""
    parts = name.split(".")
    if parts[0] != "mnemoray":
        return None
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in RANK:
            return prefix
    return None


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
                package = module.split(".")
                if path.name != "__init__.py":
                    package = package[:-1]
                base = package[: len(package) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)
    return found


def _resolved(name: str, modules: dict[str, Path]) -> str:
    # "a.b.c" may be module a.b.c or name c in module a.b: keep the longest module.
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def test_every_module_has_a_layer() -> None:
    assert [m for m in _modules() if layer_of(m) is None] == []


def test_packages_import_only_downward() -> None:
    modules = _modules()
    bad = []
    for module, path in modules.items():
        mine = layer_of(module)
        assert mine is not None
        for name in _imports(path, module):
            target = _resolved(name, modules)
            other = layer_of(target) if target else None
            if other is None or other == mine:
                continue
            if RANK[other] > RANK[mine] or (RANK[other] == RANK[mine]):
                bad.append(f"{module} ({mine}) imports {target} ({other})")
    assert not bad, "imports that run upward or sideways:\n" + "\n".join(sorted(set(bad)))


def test_ray_only_at_the_edges() -> None:
    bad = []
    for module, path in _modules().items():
        layer = layer_of(module)
        assert layer is not None
        if RANK[layer] >= RANK[RAY_FROM]:
            continue
        for name in _imports(path, module):
            if name == "ray" or name.startswith("ray."):
                bad.append(f"{module} imports {name}")
    assert not bad, "Ray below the edges:\n" + "\n".join(sorted(set(bad)))


def test_no_import_cycles_between_modules() -> None:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        deps = set()
        for name in _imports(path, module):
            name = _resolved(name, modules)
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
