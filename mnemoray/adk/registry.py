"""ADK's service registry: the ``mnemoray`` schemes (:mod:`mnemoray.adk.uri`) mapped to
the memory, session and artifact services. Kept apart from the URI parser, which the
services themselves use, so the import graph has no cycle."""

from __future__ import annotations

import logging
from typing import Any

from mnemoray.adk.artifacts import MnemorayArtifactService
from mnemoray.adk.memory import MnemorayMemoryService
from mnemoray.adk.sessions import MnemoraySessionService
from mnemoray.adk.uri import SCHEMES

log = logging.getLogger(__name__)


def _kwargs(kind: str, kwargs: dict[str, Any]) -> str | None:
    """ADK passes options meant for its own backends too: say so, keep ``agents_dir``."""
    extra = sorted(set(kwargs) - {"agents_dir"})
    if extra:
        log.warning("mnemoray %s service ignores ADK options %s", kind, extra)
    return kwargs.get("agents_dir")


def memory_factory(uri: str, **kwargs: Any) -> Any:
    return MnemorayMemoryService(uri=uri, agents_dir=_kwargs("memory", kwargs))


def session_factory(uri: str, **kwargs: Any) -> Any:
    return MnemoraySessionService(uri=uri, agents_dir=_kwargs("session", kwargs))


def artifact_factory(uri: str, **kwargs: Any) -> Any:
    return MnemorayArtifactService(uri=uri, agents_dir=_kwargs("artifact", kwargs))


def register(registry: Any = None) -> Any:
    """Register the ``mnemoray`` schemes for memory, session and artifact services in
    ``registry`` (default: ADK's own, the one ``adk web`` / ``adk run`` resolve URIs
    with); returns it. Registering again changes nothing."""
    if registry is None:
        from google.adk.cli.service_registry import get_service_registry

        registry = get_service_registry()
    for scheme in SCHEMES:
        registry.register_memory_service(scheme, memory_factory)
        registry.register_session_service(scheme, session_factory)
        registry.register_artifact_service(scheme, artifact_factory)
    return registry


__all__ = ["artifact_factory", "memory_factory", "register", "session_factory"]
