"""The one way mnemoray starts (or joins) Ray: a new local instance listens on 127.0.0.1
and authenticates every call.

``mnemoray backfill``, ``mnemoray serve``, the demo and the test suite's cluster all
start Ray here, so none of Ray's own servers (GCS, raylet, object manager, workers,
dashboard and runtime-env agents, metrics exporter) listens beyond loopback. One server
ignores the node's address: each Serve replica's inter-deployment gRPC server binds
``[::]:0`` (Ray Serve's replica, no setting moves it). Ray's token authentication closes
it: a new local instance runs with ``RAY_AUTH_MODE=token`` and a token made for that
instance alone, held in the environment of its processes (never written to disk), so a
call without it is refused before any request is read. Joining a given cluster
(``address`` or ``$RAY_ADDRESS``) takes it as it is: its network settings, token and
firewall apply (docs/serving.md, "Exposure").
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from typing import Any

# Ray's switch for single-node instances (its default on macOS and Windows): the node's
# address is the loopback one, so GCS, raylet, workers, agents and metrics exporters all
# listen on 127.0.0.1 instead of every interface. Read when Ray is imported.
LOOPBACK_RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
LOOPBACK = "127.0.0.1"
# Ray's own token authentication (gRPC and HTTP), read by every Ray process from its
# environment; RAY_AUTH_TOKEN wins over a token file, so none is read or written.
AUTH_MODE_ENV = "RAY_AUTH_MODE"
AUTH_TOKEN_ENV = "RAY_AUTH_TOKEN"


def instance_auth_env() -> dict[str, str]:
    """Token authentication with a fresh token: one per local instance, so no other
    instance (another user's, an earlier run's) shares it."""
    return {AUTH_MODE_ENV: "token", AUTH_TOKEN_ENV: secrets.token_hex(32)}


def local_ray_options(
    address: str | None,
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """``ray.init`` keyword arguments and the environment for ``address``.

    ``address`` (else ``$RAY_ADDRESS``) joins that cluster as it is. Otherwise a NEW
    local instance is started (never an unrelated ``ray start`` cluster found on the
    machine), bound to the loopback interface and with its own authentication token.
    """
    environ = os.environ if environ is None else environ
    address = address or environ.get("RAY_ADDRESS") or "local"
    if address != "local":
        return {"address": address, "include_dashboard": False}, {}
    return (
        {"address": "local", "include_dashboard": False, "_node_ip_address": LOOPBACK},
        {**LOOPBACK_RAY_ENV, **instance_auth_env()},
    )


def start_ray(
    address: str | None,
    env_vars: Mapping[str, str],
    *,
    log_to_driver: bool = True,
    env_when_joining: bool = True,
    **init_options: Any,
) -> bool:
    """Start a loopback-only local Ray, or join ``address``; True if this call started
    one. Already initialised (a test's cluster, a notebook): used as is, False.

    ``env_vars`` go to the workers (of a joined cluster too unless ``env_when_joining``
    is off: a job submitted with its own runtime environment keeps it);
    ``init_options`` (``num_cpus``, ``namespace``, ...) go to ``ray.init``.
    """
    import ray

    if ray.is_initialized():
        return False
    kwargs, env = local_ray_options(address)
    if env:
        os.environ.update(env)  # the Ray processes started below inherit it
        from ray._private import ray_constants

        # Ray reads the switch when it is imported; this process may have imported it
        # before: apply it here too, or the node would pick its external address.
        ray_constants.ENABLE_RAY_CLUSTER = False
        _reload_auth_config()
    started = kwargs["address"] == "local"
    if started or env_when_joining:
        init_options["runtime_env"] = {"env_vars": dict(env_vars)}
    ray.init(**kwargs, **init_options, log_to_driver=log_to_driver)
    return started


def _reload_auth_config() -> None:
    """This process's Ray reads its authentication mode and token once and caches them
    (as Ray does itself when it turns token auth on): reread both from the environment
    just set, or the driver would call its own cluster without the token."""
    # A compiled module without type stubs: mypy cannot see its names.
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
