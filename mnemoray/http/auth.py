"""API keys per app (bearer tokens). No Ray and no web framework here: unit-testable.

Keys are configured as JSON ``{"<key>": "app_name"}`` or ``{"<key>": ["app1", "app2"]}``
or ``{"<key>": {"apps": ["app1"], "app_wide": true}}``, in a file (``mnemoray serve
--api-keys FILE``, ``build_app(api_keys=FILE)``) or in the environment variable
``MNEMORAY_API_KEYS`` (the JSON itself, or a path to such a file).

- Keys configured: every route but ``/healthz`` needs ``Authorization: Bearer <key>``
  (missing or unknown key -> 401) and a key only reaches its own apps (another app ->
  403). Only SHA-256 digests of the keys leave the process that read them, so replicas
  never hold a plain key.
- App-wide recall (``POST /v1/apps/{app}/recall``: every user of the app) needs a key
  marked ``"app_wide": true``, for an app it is allowed: an admin's or a back office's
  key, never one handed to a user-facing agent (those get 403). Plain-string and list
  entries are never app-wide.
- No keys: the server runs open. It then binds to 127.0.0.1 only (the CLI and
  ``mnemoray/serve/config.yaml`` do), and as a second line of defence the API refuses clients
  that are not on the loopback interface unless ``allow_remote_without_keys`` is set.
  A third: it answers only requests addressed to a loopback name (``Host``: localhost,
  127.0.0.1, [::1], any port; :func:`local_host_header`), so a web page whose name an
  attacker re-points at 127.0.0.1 (DNS rebinding) cannot read or forget memories through
  the victim's browser. With ``allow_remote_without_keys`` the operator chose remote
  access without keys, and no Host is refused.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemoray.errors import ConfigError, Forbidden, MnemorayError, Unauthorized

if TYPE_CHECKING:  # settings import nothing of auth; the type only, no cycle risk
    from mnemoray.settings.serve import ServeSettings

ENV_VAR = "MNEMORAY_API_KEYS"
MIN_KEY_CHARS = 16
# to_digests' entry of an app-wide key: its digest under this prefix (a digest is
# hex, so it never collides), so the replicas' setting keeps its type.
APP_WIDE_PREFIX = "app_wide:"


class AuthConfigError(ConfigError):
    """The API key configuration is malformed; the message says where."""


class AuthError(MnemorayError):
    """A request is not allowed; the subclass sets the status: 401 or 403."""


class NotAuthenticated(AuthError, Unauthorized):
    """No, or an unknown, API key (401: who are you?)."""


class NotPermitted(AuthError, Forbidden):
    """The caller may not use this app (403: not yours)."""


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ApiKeys:
    """sha256(key) -> apps the key may read and write. Empty = the server runs open.

    ``app_wide``: the digests of the keys that may also recall across all users of
    their apps."""

    digests: Mapping[str, frozenset[str]]
    app_wide: frozenset[str] = frozenset()

    @property
    def open(self) -> bool:
        return not self.digests

    @classmethod
    def none(cls) -> ApiKeys:
        return cls({})

    @classmethod
    def from_mapping(cls, raw: Any, where: str = "api keys") -> ApiKeys:
        """``{"key": "app" | ["app", ...] | {"apps": [...], "app_wide": bool}}`` ->
        ApiKeys (validated, keys hashed)."""
        if not isinstance(raw, Mapping):
            raise AuthConfigError(
                f'{where}: expected a JSON object {{"key": "app" or '
                f'["app", ...]}}, got {type(raw).__name__}'
            )
        digests: dict[str, frozenset[str]] = {}
        app_wide: set[str] = set()
        for i, (key, apps) in enumerate(raw.items()):
            if not isinstance(key, str) or len(key.strip()) < MIN_KEY_CHARS:
                raise AuthConfigError(
                    f"{where}: key #{i + 1} must be a string of at least {MIN_KEY_CHARS} characters"
                )
            if key != key.strip() or any(c.isspace() for c in key):
                raise AuthConfigError(f"{where}: key #{i + 1} must not contain whitespace")
            wide = False
            if isinstance(apps, Mapping):
                extra = set(apps) - {"apps", "app_wide"}
                wide = apps.get("app_wide", False)
                if extra or not isinstance(wide, bool):
                    raise AuthConfigError(
                        f'{where}: key #{i + 1}: an object takes "apps" '
                        f'and "app_wide" (true/false) only, got '
                        f"{sorted(apps)!r}"
                    )
                apps = apps.get("apps")
            names = [apps] if isinstance(apps, str) else apps
            if (
                not isinstance(names, list)
                or not names
                or not all(isinstance(a, str) and a for a in names)
            ):
                raise AuthConfigError(
                    f"{where}: key #{i + 1} must map to an app name or a "
                    f"non-empty list of app names, got {apps!r}"
                )
            digests[key_digest(key)] = frozenset(names)
            if wide:
                app_wide.add(key_digest(key))
        return cls(digests, frozenset(app_wide))

    @classmethod
    def from_digests(cls, raw: Mapping[str, Iterable[str]] | None) -> ApiKeys:
        """Inverse of :meth:`to_digests` (what deployments receive)."""
        digests, wide = {}, set()
        for d, apps in (raw or {}).items():
            if d.startswith(APP_WIDE_PREFIX):
                d = d[len(APP_WIDE_PREFIX) :]
                wide.add(d)
            digests[d] = frozenset(apps)
        return cls(digests, frozenset(wide))

    def to_digests(self) -> dict[str, list[str]]:
        return {
            (APP_WIDE_PREFIX + d if d in self.app_wide else d): sorted(apps)
            for d, apps in self.digests.items()
        }

    def apps_for(self, key: str) -> frozenset[str] | None:
        return self.digests.get(key_digest(key))

    def is_app_wide(self, key: str) -> bool:
        return key_digest(key) in self.app_wide


def load_api_keys(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> ApiKeys:
    """Keys from ``path`` if given, else from ``$MNEMORAY_API_KEYS`` (JSON or a path)."""
    env = os.environ if env is None else env
    if path is not None and str(path).strip():
        return _from_file(Path(path).expanduser())
    value = env.get(ENV_VAR, "").strip()
    if not value:
        return ApiKeys.none()
    if value.startswith("{"):
        try:
            raw = json.loads(value)
        except json.JSONDecodeError as exc:
            raise AuthConfigError(f"{ENV_VAR}: invalid JSON ({exc.msg})") from exc
        return ApiKeys.from_mapping(raw, ENV_VAR)
    return _from_file(Path(value).expanduser())


def resolve_keys(settings: ServeSettings) -> ApiKeys:
    """The key set of ``server.api_keys`` (a file path or a mapping); none: open API.
    Shared by ``mnemoray serve`` (Ray) and ``mnemoray ui`` (no Ray)."""
    api_keys = settings.server.api_keys
    if isinstance(api_keys, Mapping):
        return ApiKeys.from_mapping(api_keys, "server.api_keys")
    # env={}: keys come only from the settings (MNEMORAY_SERVER__API_KEYS among them).
    return load_api_keys(api_keys, env={})


def _from_file(path: Path) -> ApiKeys:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AuthConfigError(f"api keys file {path}: cannot read it ({exc.strerror})") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AuthConfigError(
            f"api keys file {path}: invalid JSON ({exc.msg}, line {exc.lineno})"
        ) from exc
    return ApiKeys.from_mapping(raw, f"api keys file {path}")


@dataclass(frozen=True)
class Principal:
    """Who is calling: ``apps`` it may use, or None when the server runs open."""

    apps: frozenset[str] | None
    key_id: str | None = None  # a prefix of the key's digest: names the key, reveals nothing
    app_wide: bool = False  # may recall across all users of its apps

    @property
    def actor(self) -> str:
        """Who a change is recorded as: ``key:<id>``, or ``local`` on a server without keys."""
        return f"key:{self.key_id}" if self.key_id else "local"

    def check(self, app_name: str) -> None:
        if self.apps is not None and app_name not in self.apps:
            # Same answer whether or not the app exists: nothing leaks about other tenants.
            raise NotPermitted(
                f"this API key is not allowed to use app {app_name!r}", field="app_name"
            )

    @property
    def sees_app_wide(self) -> bool:
        """May read across the users of its apps: a key marked ``app_wide``, or no keys
        (the loopback-only open server, where the Python API can do the same)."""
        return self.apps is None or self.app_wide

    def check_app_wide(self, app_name: str) -> None:
        """App-wide recall: an app of this key, and :attr:`sees_app_wide`."""
        self.check(app_name)
        if not self.sees_app_wide:
            raise NotPermitted(
                f"this API key may not recall across the users of app "
                f'{app_name!r}: that needs a key marked "app_wide": true',
                field="app_name",
            )


OPEN = Principal(None)


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8765`` -> ``::1``)."""
    host = header.strip().lower()
    if host.startswith("["):  # an IPv6 literal, bracketed
        end = host.find("]")
        return host[1:end] if end > 0 else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def local_host_header(header: str | None) -> bool:
    """``Host`` names this machine's loopback (localhost, 127.x, [::1]; any port). A page
    of another name whose DNS an attacker points at 127.0.0.1 sends its own name."""
    return bool(header) and is_loopback(host_name(header or ""))


def check_local_host(header: str | None) -> None:
    """NotPermitted (403) unless ``header`` is a loopback name (:func:`local_host_header`):
    the open, loopback-only server's guard against DNS rebinding."""
    if not local_host_header(header):
        shown = (header or "")[:100]
        raise NotPermitted(
            f"this server runs without API keys and answers requests to "
            f"localhost, 127.0.0.1 or [::1] only, not Host header {shown!r}; "
            f"configure API keys to serve other names",
            field="host",
        )


def authenticate(
    keys: ApiKeys,
    authorization: str | None,
    client_host: str | None,
    *,
    allow_remote_without_keys: bool = False,
) -> Principal:
    """The caller's principal; NotAuthenticated (401: no or unknown key) or
    NotPermitted (403: a remote client of a server without keys)."""
    if keys.open:
        if allow_remote_without_keys or is_loopback(client_host):
            return OPEN
        raise NotPermitted(
            "this server runs without API keys and only accepts clients on "
            "127.0.0.1; configure API keys to serve other hosts"
        )
    token = bearer_token(authorization)
    if token is None:
        raise NotAuthenticated(
            "missing bearer token (Authorization: Bearer <api key>)", field="authorization"
        )
    apps = keys.apps_for(token)
    if apps is None:
        raise NotAuthenticated("unknown API key", field="authorization")
    return Principal(apps, key_digest(token)[:12], keys.is_app_wide(token))
