"""What Serve tells an ingress replica about its ingress: whether Serve's own HTTP
proxy runs (so an app that did not choose ``server.ingress`` keeps the proxy, as
before direct ingress became the default) and how long the replica may take to stop.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("ray.serve")

# Serve's defaults: the controller kills a stopping replica graceful_shutdown_timeout_s
# (20 s) after asking it to stop, and the replica spends graceful_shutdown_wait_loop_s
# (2 s) draining Serve's own requests before it calls __del__. What is left is what
# __del__ may spend on the direct-ingress requests still open; used when the
# deployment's own values cannot be read.
SERVE_SHUTDOWN_TIMEOUT_S = 20.0
SERVE_SHUTDOWN_WAIT_LOOP_S = 2.0


def shutdown_budget_s(deployment_config: Any | None) -> float:
    """Seconds ``MemoryIngress.__del__`` may wait for open direct-ingress requests:
    the deployment's ``graceful_shutdown_timeout_s`` less the drain Serve ran first."""
    timeout = getattr(deployment_config, "graceful_shutdown_timeout_s", None)
    wait_loop = getattr(deployment_config, "graceful_shutdown_wait_loop_s", None)
    if timeout is None:
        timeout, wait_loop = SERVE_SHUTDOWN_TIMEOUT_S, SERVE_SHUTDOWN_WAIT_LOOP_S
    return max(0.0, float(timeout) - float(wait_loop or 0.0))


def replica_deployment_config() -> Any | None:
    """This replica's DeploymentConfig (None outside a replica, or where this Ray keeps
    it elsewhere: a private attribute of the replica context)."""
    from ray import serve

    try:
        return getattr(serve.get_replica_context(), "_deployment_config", None)
    except Exception:  # noqa: BLE001 - not in a replica
        return None


async def serve_proxy_runs() -> bool | None:
    """Whether this Serve instance runs its HTTP proxies (``proxy_location`` other than
    Disabled), asked of Serve's controller; None: it could not be asked."""
    import ray
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

    try:
        controller = ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
        location = await controller.get_proxy_location.remote()
    except Exception as exc:  # noqa: BLE001 - an older controller, or none reachable
        log.warning("mnemoray: could not ask Serve whether its HTTP proxy runs: %r", exc)
        return None
    return str(getattr(location, "value", location)) != "Disabled"


def ingress_to_use(configured: str, chosen: bool, proxy_runs: bool | None) -> str:
    """The ingress a replica uses. ``chosen``: some layer (flag, environment, file) set
    ``server.ingress`` (or the deprecated ``direct_ingress``). Unchosen, the default
    ``direct`` yields to a running Serve proxy: a Serve config from before direct
    ingress (``proxy_location: EveryNode``, no ``server.ingress``) keeps working instead
    of the replicas failing to bind the proxy's port."""
    if chosen or configured != "direct" or not proxy_runs:
        return configured
    log.warning(
        "mnemoray: Serve's HTTP proxy is running and server.ingress is not set: "
        "using server.ingress: proxy (set server.ingress to silence this)"
    )
    return "proxy"
