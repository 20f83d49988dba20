"""Packaging: every direct import is declared in the right place, the extras install what
their part imports, and `mnemoray[client]` needs nothing but httpx and pydantic."""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("mnemoray",)
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]

# Modules whose distribution is not installed in the test environment (the gpu extra).
NOT_INSTALLED = {"vllm": "vllm"}

# Which extra a file's third-party imports may come from (besides the base), first match.
PLACES: tuple[tuple[str, str], ...] = (
    ("mnemoray/client/", "client"),
    ("mnemoray/mcp/", "mcp"),
    ("mnemoray/cli/mcp.py", "mcp"),
    ("mnemoray/adk/", "adk"),
    ("mnemoray/summarizers/vllm_engine.py", "gpu"),
    ("mnemoray/memory/store/lance/", "lancedb"),
    ("mnemoray/postgres/", "postgres"),
    ("mnemoray/cli/ui.py", "ui"),
    ("mnemoray/ui/browser.py", "browser"),
    ("mnemoray/ui/screenshots.py", "browser"),
    ("mnemoray/ui/", "ui"),
    # The Ray-free HTTP API: `mnemoray ui` installs it with [ui]; [ray] has the same parts.
    ("mnemoray/http/", "ui"),
    ("mnemoray/ray_local.py", "ray"),
    ("mnemoray/serve/", "ray"),
    ("mnemoray/pipeline/", "ray"),
    ("mnemoray/jobs/", "ray"),
)


def names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


BASE = names(PROJECT["dependencies"])


def third_party_imports(path: Path) -> set[str]:
    """Top-level modules ``path`` imports (anywhere in it) that are neither stdlib nor ours."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            mods = [node.module]
        else:
            continue
        for mod in mods:
            top = mod.split(".")[0]
            if top not in sys.stdlib_module_names and top not in PACKAGES and top != "__future__":
                found.add(top)
    return found


@functools.cache
def installed_modules() -> dict[str, list[str]]:
    return md.packages_distributions()


def distributions_of(module: str) -> set[str]:
    if module in NOT_INSTALLED:
        return {NOT_INSTALLED[module]}
    dists = installed_modules().get(module)
    assert dists, f"{module}: imported, but no installed distribution provides it"
    return {canonicalize_name(d) for d in dists}


def test_every_direct_import_is_declared_where_its_part_installs() -> None:
    wrong: list[str] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            extra = next((e for prefix, e in PLACES if rel.startswith(prefix)), None)
            allowed = BASE | (names(EXTRAS[extra]) if extra else set())
            for module in sorted(third_party_imports(path)):
                dists = distributions_of(module)
                if not dists & allowed:
                    where = f"base or [{extra}]" if extra else "base"
                    wrong.append(f"{rel}: {module} ({'/'.join(sorted(dists))}) not in {where}")
    assert not wrong, "undeclared imports:\n" + "\n".join(wrong)


def test_extras_exist_and_dev_pulls_every_server_part() -> None:
    assert {"client", "ray", "mcp", "adk", "lancedb", "postgres", "gpu", "dev"} <= set(EXTRAS)
    assert names(EXTRAS["client"]) == {"httpx", "pydantic"}
    assert "torch" not in names(EXTRAS["client"]) and "ray" not in names(EXTRAS["client"])
    self_ref = [Requirement(r) for r in EXTRAS["dev"] if Requirement(r).name == "mnemoray"]
    assert len(self_ref) == 1
    # `make setup` installs '.[dev]' only: it must bring every extra but the GPU one.
    assert self_ref[0].extras == {
        "client",
        "ray",
        "mcp",
        "adk",
        "lancedb",
        "ui",
        "browser",
        "postgres",
    }


@pytest.mark.parametrize(
    "group", ["base", "client", "ray", "mcp", "adk", "lancedb", "postgres", "ui", "browser", "dev"]
)
def test_each_declared_requirement_is_installed_and_satisfied(group: str) -> None:
    reqs = PROJECT["dependencies"] if group == "base" else EXTRAS[group]
    bad = []
    for raw in reqs:
        req = Requirement(raw)
        if req.name == "mnemoray":
            continue
        try:
            installed = md.version(req.name)
        except md.PackageNotFoundError:
            bad.append(f"{req.name}: not installed")
            continue
        if not req.specifier.contains(installed, prereleases=True):
            bad.append(f"{req.name} {installed} does not satisfy {raw!r}")
    assert not bad, bad


def test_torch_pin_names_a_release_the_installed_build_satisfies() -> None:
    (torch_req,) = [
        Requirement(r) for r in PROJECT["dependencies"] if Requirement(r).name == "torch"
    ]
    assert str(torch_req.specifier) == "==2.13.0"
    # The local label (+cpu, +cu130, ...) is the build: the pin accepts any of them.
    installed = md.version("torch")
    assert installed.split("+")[0] == "2.13.0"
    assert torch_req.specifier.contains(installed)
    assert torch_req.specifier.contains("2.13.0+cu130")
    (vllm,) = [Requirement(r) for r in EXTRAS["gpu"]]
    # vllm 0.32.x requires torch==2.13.0; later releases move to newer torch.
    assert vllm.specifier.contains("0.32.0") and not vllm.specifier.contains("0.33.0")


# A client-only install: only httpx, pydantic and what they require can be imported.
CLIENT_ONLY = r"""
import importlib.abc, importlib.metadata as md, json, re, sys
from packaging.requirements import Requirement

def closure(names):
    seen, todo = set(), list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:  # its marker excludes this Python
            continue
        for req in map(Requirement, reqs):
            # extra "": optional extras (httpx[cli], ...) are not part of the install.
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen

allowed = closure(["httpx", "pydantic"])
dists = md.packages_distributions()

class ClientOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top == "mnemoray" or top.startswith("_"):
            return None
        owners = {re.sub(r"[-_.]+", "-", d).lower() for d in dists.get(top, [])}
        if owners & allowed:
            return None
        raise ModuleNotFoundError(f"not in a client-only install: {name}", name=name)

sys.meta_path.insert(0, ClientOnly())
import mnemoray.client
from mnemoray.client import AsyncMnemorayClient, MnemorayClient
MnemorayClient("http://127.0.0.1:9", api_key="k").close()
loaded = sorted({m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names))
print(json.dumps(loaded))
"""


def test_client_imports_nothing_but_httpx_and_pydantic() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CLIENT_ONLY], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert {"httpx", "pydantic"} <= loaded
    heavy = {
        "numpy",
        "torch",
        "ray",
        "scipy",
        "pyarrow",
        "polars",
        "faiss",
        "fastapi",
        "transformers",
        "yaml",
        "typer",
    }
    assert not loaded & heavy, sorted(loaded & heavy)


# A base-only install: every module an extra provides is missing.
BASE_ONLY = r"""
import importlib.abc, sys
from mnemoray.extras import EXTRA_OF

class BaseOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in EXTRA_OF:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, BaseOnly())
sys.argv = ["mnemoray", *sys.argv[1:]]
from mnemoray.cli.main import run
run()
"""


def base_only(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BASE_ONLY, *args],
        cwd=ROOT,
        timeout=240,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def test_extra_of_names_the_extra_that_declares_each_module() -> None:
    from mnemoray.extras import EXTRA_OF

    for module, extra in EXTRA_OF.items():
        assert distributions_of(module) & names(EXTRAS[extra]), (module, extra)
        assert not distributions_of(module) & BASE, f"{module} is in the base"


def test_base_only_runs_the_compile_demo(tmp_path: Path) -> None:
    out = base_only("demo", "--compile-only", "--turns", "6", "--workdir", str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--- system_instruction ---" in out.stdout


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["serve", "--store", "STORE"], "ray"),
        (["backfill", "--archive", "examples/archive.jsonl", "--store", "STORE"], "ray"),
        (["mcp", "--store", "STORE", "--app", "a", "--user", "u"], "mcp"),
    ],
)
def test_base_only_names_the_missing_extra_in_one_line(
    tmp_path: Path, args: list[str], extra: str
) -> None:
    out = base_only(*[str(tmp_path) if a == "STORE" else a for a in args])
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip().splitlines() == [
        f"error: {extra} is not installed: pip install 'mnemoray[{extra}]'"
    ]


def test_the_backfill_job_without_ray_names_the_extra(tmp_path: Path) -> None:
    # `python -m mnemoray.jobs.backfill` (what `ray job submit` runs) says the same as the CLI.
    job = BASE_ONLY.replace(
        "from mnemoray.cli.main import run\nrun()",
        "from mnemoray.jobs.backfill import main\nsys.exit(main())",
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            job,
            "--archive",
            "examples/archive.jsonl",
            "--store",
            str(tmp_path),
        ],
        cwd=ROOT,
        timeout=240,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip().splitlines() == [
        "error: ray is not installed: pip install 'mnemoray[ray]'"
    ]


def test_only_the_mnemoray_namespace_is_installed() -> None:
    # `pipeline` is another project's name on PyPI: nothing but mnemoray goes into site-packages.
    from setuptools import find_packages

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = find_packages(where=str(ROOT), include=tool["packages"]["find"]["include"])
    assert "mnemoray.serve" in found and "mnemoray.cli" in found
    assert {name.split(".")[0] for name in found} == {"mnemoray"}
