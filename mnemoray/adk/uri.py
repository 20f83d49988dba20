"""``mnemoray://`` URIs for ADK's service registry (``adk web --memory_service_uri ...``).

    mnemoray:///srv/store             the store directory, in this process: memory in it,
                                      sessions in STORE/sessions.db, artifacts in
                                      STORE/artifacts (the files ``mnemoray serve`` uses)
    mnemoray:store                    the same, relative to the current directory
    mnemoray://host:8000              a running ``mnemoray serve`` (memory only), over http
    mnemoray+https://host/prefix      ... over https

Query options: ``embedder`` and ``summarizer`` (in-process memory; as ``mnemoray
serve --embedder``), ``top_k`` (memories per search), ``api_key_env`` (remote: the
environment variable holding the API key, default ``MNEMORAY_API_KEY``; a key never
goes in a URI). Make ADK resolve them with :func:`mnemoray.adk.registry.register`,
e.g. in the agent directory's ``services.py``::

    from mnemoray.adk import register
    register()
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from mnemoray.errors import ConfigError, InvalidInput

log = logging.getLogger(__name__)
SCHEMES = {"mnemoray": "http", "mnemoray+http": "http", "mnemoray+https": "https"}
OPTIONS = ("embedder", "summarizer", "top_k", "api_key_env")
DEFAULT_KEY_ENV = "MNEMORAY_API_KEY"


@dataclass(frozen=True)
class MnemorayUri:
    """A parsed ``mnemoray`` URI: a local store directory or a server's base URL."""

    uri: str
    store: Path | None = None
    base_url: str | None = None
    embedder: str = "default"
    summarizer: str = "extractive"
    top_k: int | None = None
    api_key_env: str = DEFAULT_KEY_ENV

    def memory_backend(self) -> Any:
        if self.base_url is not None:
            from mnemoray.adk.remote import RemoteMemorySource
            from mnemoray.client import MnemorayClient

            return RemoteMemorySource(
                MnemorayClient(self.base_url, os.environ.get(self.api_key_env))
            )
        from mnemoray.memory.service.service import MemoryService

        embedder = None if self.embedder == "none" else self.embedder
        return MemoryService.open(
            self._local("memory"), embedder=embedder, summarizer=self.summarizer
        )

    def session_store(self) -> Any:
        from mnemoray.sessions.sqlite.store import SQLiteSessionStore

        return SQLiteSessionStore(self._local("sessions") / "sessions.db")

    def artifact_store(self) -> Any:
        from mnemoray.artifacts.files import FileArtifactStore

        return FileArtifactStore(self._local("artifacts") / "artifacts")

    def _local(self, what: str) -> Path:
        if self.store is None:
            raise ConfigError(
                f"{self.uri}: a server URI serves memory only; for {what} name "
                "the store directory the server uses (mnemoray:///path/to/store)",
                field="uri",
            )
        self.store.mkdir(parents=True, exist_ok=True)
        return self.store


def parse_uri(uri: str, agents_dir: str | None = None) -> MnemorayUri:
    """Parse a ``mnemoray`` URI (module doc); errors name the part that is wrong.
    ``agents_dir`` (passed by ADK) is not used: relative paths are the shell's."""
    if not isinstance(uri, str):
        raise InvalidInput(f"expected a string, got {type(uri).__name__}", field="uri")
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidInput(f"{uri!r}: scheme must be one of {', '.join(SCHEMES)}", field="uri")
    options: dict[str, Any] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name not in OPTIONS:
            raise InvalidInput(
                f"{uri!r}: unknown option {name!r}; known: {', '.join(OPTIONS)}", field="uri"
            )
        options[name] = value
    if "top_k" in options:
        if not options["top_k"].isdigit() or int(options["top_k"]) < 1:
            raise InvalidInput(
                f"{uri!r}: top_k must be a positive int, got {options['top_k']!r}", field="uri"
            )
        options["top_k"] = int(options["top_k"])
    if parts.netloc:
        if "@" in parts.netloc:
            raise InvalidInput(
                f"{scheme}://...: no credentials in the URI; put the API key "
                f"in ${options.get('api_key_env', DEFAULT_KEY_ENV)}",
                field="uri",
            )
        base = f"{SCHEMES[scheme]}://{parts.netloc}{parts.path.rstrip('/')}"
        return MnemorayUri(uri, base_url=base, **options)
    if scheme != "mnemoray":
        raise InvalidInput(f"{uri!r}: {scheme} names a server: {scheme}://host[:port]", field="uri")
    path = unquote(parts.path)
    if not path:
        raise InvalidInput(
            f"{uri!r}: name a store directory (mnemoray:///path/to/store) or "
            "a server (mnemoray://host:port)",
            field="uri",
        )
    return MnemorayUri(uri, store=Path(path).expanduser().absolute(), **options)


T = TypeVar("T")


def given_or_from_uri(
    given: T | None,
    uri: str | None,
    agents_dir: str | None,
    what: str,
    build: Callable[[MnemorayUri], T],
) -> T:
    """What an ADK service was handed: ``given``, or what ``uri`` names (exactly one)."""
    if (given is None) == (uri is None):
        raise TypeError(f"pass either a mnemoray {what} or uri=...")
    if uri is not None:
        return build(parse_uri(uri, agents_dir=agents_dir))
    assert given is not None  # exactly one of the two (checked above)
    return given


__all__ = ["DEFAULT_KEY_ENV", "MnemorayUri", "OPTIONS", "SCHEMES", "given_or_from_uri", "parse_uri"]
