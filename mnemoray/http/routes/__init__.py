"""The HTTP routes, one ``APIRouter`` per resource, over :class:`mnemoray.http.backend.ApiBackend`.

Tenant fields: POST/PUT bodies carry ``app_name`` and ``user_id``; GET/DELETE
take them from the path or the query string (see ``mnemoray.schemas``). Every route
but ``/healthz`` authenticates the caller (``deps.Caller``) and checks the app.
"""

from __future__ import annotations

from fastapi import APIRouter

from mnemoray.http.routes import (
    apps,
    artifacts,
    context,
    graph,
    jobs,
    memories,
    ops,
    profiles,
    sessions,
    store,
)
from mnemoray.ui.routes import router as ui_router

ROUTERS: tuple[APIRouter, ...] = (
    ops.router,
    memories.router,
    sessions.router,
    context.router,
    artifacts.router,
    jobs.router,
    graph.router,
    profiles.router,
    apps.router,
    store.router,
    ui_router,
)

__all__ = ["ROUTERS"]
