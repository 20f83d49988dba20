"""The Dockerfile and the KubeRay RayService manifest point at things that exist: paths,
the console script and its flags, the Serve import path, and settings that parse.
(No docker or kubectl here: these check the files against the code.)"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.metadata
import json
import re
import shlex
from pathlib import Path

import pytest
import typer.main
import yaml
from packaging.requirements import Requirement

from mnemoray.settings.serve import load_settings

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s"


def instructions(path: Path) -> list[tuple[str, str]]:
    """``(KEYWORD, arguments)`` per instruction: continuations joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # Docker drops comment lines, inside a continuation too
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        out.append((keyword.upper(), args.strip()))
        pending = ""
    return out


DOCKER = instructions(ROOT / "Dockerfile")
FINAL = DOCKER[max(i for i, (k, _) in enumerate(DOCKER) if k == "FROM") :]


def only(keyword: str, stage: list[tuple[str, str]] = FINAL) -> str:
    (args,) = [a for k, a in stage if k == keyword]
    return args


def docker_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, args in FINAL:
        if keyword == "ENV":
            env.update(dict(pair.split("=", 1) for pair in shlex.split(args)))
    return env


def test_copy_sources_exist_and_are_not_dockerignored() -> None:
    ignored = [
        p.strip()
        for p in (ROOT / ".dockerignore").read_text().splitlines()
        if p.strip() and not p.startswith("#")
    ]
    copies = [shlex.split(a) for k, a in DOCKER if k == "COPY"]
    sources = [s for parts in copies if not parts[0].startswith("--") for s in parts[:-1]]
    assert {"pyproject.toml", "README.md", "mnemoray"} <= set(sources)
    for src in sources:
        assert (ROOT / src).exists(), src
        assert not any(fnmatch.fnmatch(src, pat) for pat in ignored), src


def test_entrypoint_is_mnemoray_serve_with_known_flags() -> None:
    assert json.loads(only("ENTRYPOINT")) == ["mnemoray", "serve"]
    script = (ROOT / "pyproject.toml").read_text()
    assert 'mnemoray = "mnemoray.cli.main:run"' in script
    cli = importlib.import_module("mnemoray.cli.main")
    assert callable(cli.run)
    serve_cmd = typer.main.get_command(cli.app).commands["serve"]
    known = {opt for p in serve_cmd.params for opt in p.opts}
    cmd = json.loads(only("CMD"))
    flags = [a for a in cmd if a.startswith("--")]
    assert flags and set(flags) <= known, set(flags) - known
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"


def test_runtime_is_offline_non_root_and_probes_healthz() -> None:
    env = docker_env()
    assert env["HF_HUB_OFFLINE"] == "1"
    user = only("USER")
    assert user not in ("root", "0")
    keywords = [k for k, _ in FINAL]
    assert keywords.index("USER") < keywords.index("ENTRYPOINT")
    cmd = json.loads(only("CMD"))
    port = cmd[cmd.index("--port") + 1]
    assert only("EXPOSE") == port
    probe = only("HEALTHCHECK")
    assert f"http://127.0.0.1:{port}/healthz" in probe
    from mnemoray.http.routes.ops import router

    assert "/healthz" in {route.path for route in router.routes}


def test_image_settings_parse_and_name_api_keys() -> None:
    """The image's MNEMORAY_* variables and CMD flags through the one settings loader."""
    cmd = json.loads(only("CMD"))
    flags = {
        "server.host": cmd[cmd.index("--host") + 1],
        "server.port": cmd[cmd.index("--port") + 1],
    }
    s = load_settings(flags, env=docker_env())
    assert s.server.host == "0.0.0.0" and s.server.port == 8000
    assert s.store == "/var/lib/mnemoray/store"
    assert s.server.api_keys == "/etc/mnemoray/api_keys.json"  # non-loopback needs keys


def test_image_torch_pin_and_extras_match_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (pin,) = [r for r in project["dependencies"] if Requirement(r).name == "torch"]
    torch_installs = [a for k, a in FINAL if k == "RUN" and "torch==" in a]
    assert torch_installs and all(pin in a for a in torch_installs)
    args = dict(a.split("=", 1) for k, a in FINAL if k == "ARG" and "=" in a)
    assert args["TORCH_VARIANT"] == "cpu"
    extras = set(project["optional-dependencies"])
    assert set(args["EXTRAS"].split(",")) <= extras
    header = (ROOT / "Dockerfile").read_text().split("\nARG", 1)[0]
    assert "--build-arg TORCH_VARIANT=cuda --build-arg EXTRAS=ray,postgres,gpu" in header


# -- KubeRay ----------------------------------------------------------------------------------
def load_docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def of_kind(docs: list[dict], kind: str) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


SERVICE = of_kind(load_docs("rayservice.yaml"), "RayService")
SERVE_CONFIG = yaml.safe_load(SERVICE["spec"]["serveConfigV2"])
(APP,) = SERVE_CONFIG["applications"]


def test_rayservice_runs_the_app_of_serve_config() -> None:
    config = ROOT / "mnemoray" / "serve" / "config.yaml"
    (reference,) = yaml.safe_load(config.read_text())["applications"]
    for key in ("name", "route_prefix", "import_path"):
        assert APP[key] == reference[key], key
    assert [d["name"] for d in APP["deployments"]] == [d["name"] for d in reference["deployments"]]
    module, _, attr = APP["import_path"].partition(":")
    assert callable(getattr(importlib.import_module(module), attr))


def test_rayservice_settings_come_from_env_and_parse() -> None:
    env = APP["runtime_env"]["env_vars"]
    ours = {k: v for k, v in env.items() if k.startswith("MNEMORAY_")}
    assert "MNEMORAY_STORE" in ours and not APP["args"]
    s = load_settings(APP["args"], env=ours)  # unknown MNEMORAY_* names raise here
    assert env["HF_HUB_OFFLINE"] == "1"
    assert SERVE_CONFIG["http_options"]["host"] == "0.0.0.0"
    assert s.server.api_keys, "a non-loopback proxy needs API keys"
    assert s.server.ingress == "proxy"  # the Service targets the proxies on 8000
    assert s.recall.mode == "hybrid" and s.ingestion.trigger.type == "session_end"


def pod_specs() -> list[dict]:
    cluster = SERVICE["spec"]["rayClusterConfig"]
    return [
        cluster["headGroupSpec"]["template"]["spec"],
        *[g["template"]["spec"] for g in cluster["workerGroupSpecs"]],
    ]


@pytest.mark.parametrize("pod", pod_specs(), ids=["head", "workers"])
def test_every_ray_pod_mounts_the_store_and_the_keys(pod: dict) -> None:
    env = APP["runtime_env"]["env_vars"]
    store, keys = env["MNEMORAY_STORE"], env["MNEMORAY_SERVER__API_KEYS"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    (container,) = pod["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert volumes[mounts[store]]["persistentVolumeClaim"]["claimName"] == "mnemoray-store"
    assert "secret" in volumes[mounts[str(Path(keys).parent)]]
    # The image's own user (Dockerfile: useradd --uid), never root.
    (uid,) = re.findall(r"useradd [^&]*--uid (\d+)", " ".join(a for k, a in FINAL if k == "RUN"))
    assert pod["securityContext"]["runAsUser"] == int(uid) != 0


def test_rayservice_shares_store_claim_and_ray_version_with_the_cronjob() -> None:
    cron = load_docs("rayjob-cron.yaml")
    claims = {d["metadata"]["name"] for d in cron if d["kind"] == "PersistentVolumeClaim"}
    assert "mnemoray-store" in claims
    cron_version = of_kind(cron, "RayCronJob")["spec"]["jobTemplate"]["rayClusterSpec"][
        "rayVersion"
    ]
    assert SERVICE["spec"]["rayClusterConfig"]["rayVersion"] == cron_version


# -- ray up ---------------------------------------------------------------------------------
CLUSTER = yaml.safe_load((ROOT / "ray_cluster.yaml").read_text())


def _installed_scripts(command: str, project: dict) -> set[str]:
    """The console scripts a ``pip install -e '.[extras]'`` puts in its venv's bin: the
    project's own and those of every distribution its base and those extras require."""
    (spec,) = re.findall(r"-e\s+'?\.(?:\[([\w,]+)\])?'?", command)
    wanted = [Requirement(r) for r in project["dependencies"]]
    for extra in filter(None, spec.split(",")):
        wanted += [Requirement(r) for r in project["optional-dependencies"][extra]]
    scripts = set(project["scripts"]) | {"python", "python3", "pip"}
    for req in wanted:
        dist = importlib.metadata.distribution(req.name)
        scripts |= {ep.name for ep in dist.entry_points if ep.group == "console_scripts"}
    return scripts


def test_ray_up_installs_what_its_start_commands_call() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    home = f"/home/{CLUSTER['auth']['ssh_user']}"
    (mount,) = [dst for dst, src in CLUSTER["file_mounts"].items() if src == "."]
    assert mount == f"{home}/mnemoray"
    setup = CLUSTER["setup_commands"]
    # A venv in the mounted project, then one pip of that venv installs the project.
    assert any(re.search(r"cd ~/mnemoray && python3 -m venv \.venv$", c) for c in setup)
    (install,) = [c for c in setup if "pip install" in c]
    assert "cd ~/mnemoray && .venv/bin/pip install" in install
    # The pinned torch, as the CPU wheel from PyTorch's CPU index.
    (pin,) = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == "torch"]
    (version,) = [s.version for s in pin.specifier]
    assert f"torch=={version}+cpu" in install
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in install
    scripts = _installed_scripts(install, project)
    starts = CLUSTER["head_start_ray_commands"] + CLUSTER["worker_start_ray_commands"]
    called = [
        m.group(1) for c in starts for m in re.finditer(r"~/mnemoray/\.venv/bin/([\w.-]+)", c)
    ]
    assert called and set(called) <= scripts, set(called) - scripts
    # Every executable a start command names is the venv's (no `ray` off the PATH).
    for c in starts:
        for part in c.split(";"):
            words = [w for w in shlex.split(part) if "=" not in w.split("/")[0]]
            if words and words[0] != "ulimit":
                assert words[0].startswith("~/mnemoray/.venv/bin/"), part
