"""Which optional extra (pyproject.toml) provides a module, for a one-line hint when a
command needs a part that is not installed (``pip install 'mnemoray[ray]'``)."""

from __future__ import annotations

# Top-level modules imported directly by the optional parts -> the extra that installs them.
EXTRA_OF: dict[str, str] = {
    "ray": "ray",
    "fastapi": "ray",
    "starlette": "ray",
    "prometheus_client": "ray",
    "mcp": "mcp",
    "mcp_types": "mcp",
    "google": "adk",
    "vllm": "gpu",
    "lancedb": "lancedb",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra that would have installed the module ``exc`` names; None: not ours."""
    return EXTRA_OF.get((exc.name or "").split(".")[0])


def install_hint(exc: ModuleNotFoundError) -> str | None:
    """``"ray is not installed: pip install 'mnemoray[ray]'"``, or None (not an extra's)."""
    extra = missing_extra(exc)
    if extra is None:
        return None
    return f"{exc.name} is not installed: pip install 'mnemoray[{extra}]'"
