"""Package faces that import what they export on first use.

Importing one light module of a package (the client's schemas import
``mnemoray.memory.records.kinds``) runs the package's ``__init__``; a face that imported
everything it exports would load numpy, FAISS and the models there. Such a face lists
each exported name with the module that defines it and resolves it when first asked::

    _EXPORTS = {"MemoryService": "mnemoray.memory.service.service"}
    __all__ = sorted(_EXPORTS)

    def __getattr__(name: str) -> Any:
        return lazy_export(__name__, _EXPORTS, name)
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def lazy_export(package: str, exports: Mapping[str, str], name: str) -> Any:
    """``name`` from the module ``exports`` maps it to; AttributeError for any other name
    (what a module's ``__getattr__`` must raise)."""
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
