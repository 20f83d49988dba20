"""The one root of mnemoray's errors, and the class that decides each HTTP status.

Every error the library raises on purpose is a :class:`MnemorayError`. Its class
says what went wrong (bad input, not found, conflict, ...), and the HTTP edge maps
the class to a status: nothing is routed by reading messages. An exception
that is not a ``MnemorayError`` is a bug: the server logs it in full and answers
500 with a request id, no internals.

Input errors name the field: ``InvalidInput("must be >= 1", field="top_k")``
reads ``top_k: must be >= 1``. A caller that validates a nested value re-raises
with its own prefix, ``exc.within("events[3]")`` -> ``events[3].timestamp: ...``;
``SessionError.nested(exc, "events[3]")`` does the same as the caller's own class.
Library classes keep their old builtin base where callers relied on it
(``SessionNotFoundError`` is still a ``KeyError``), as a second base.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

E = TypeVar("E", bound="MnemorayError")


def nested_field(prefix: str, field: str | None) -> str | None:
    """``prefix`` + ``field``: ``events[3]`` + ``role`` -> ``events[3].role``."""
    if not field or not prefix:
        return field or prefix or None
    return f"{prefix}{'' if field.startswith('[') else '.'}{field}"


class MnemorayError(Exception):
    """Root of every error mnemoray raises on purpose.

    The HTTP status is the *class's* ``status`` (an instance attribute of the same
    name, e.g. a summarizer backend's own HTTP status, does not change it).
    """

    status: ClassVar[int] = 500
    #: Safe to show a client: the message names the caller's input, not our internals.
    #: When False the client gets the status and a request id, the log the message.
    public: ClassVar[bool] = True

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.reason = message
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)

    @property
    def message(self) -> str:
        return str(self)

    def within(self, prefix: str) -> MnemorayError:
        """The same error for a value nested under ``prefix`` (field ``prefix.field``)."""
        err = type(self).__new__(type(self))
        MnemorayError.__init__(err, self.reason, field=nested_field(prefix, self.field))
        err.__dict__.update(
            {k: v for k, v in self.__dict__.items() if k not in ("reason", "field")}
        )
        return err

    @classmethod
    def nested(cls: type[E], exc: MnemorayError, prefix: str = "") -> E:
        """``exc`` (message and field) as this class, for a value nested under
        ``prefix``: ``SessionError.nested(event_error, "events[3]")``."""
        err = cls.__new__(cls)
        MnemorayError.__init__(err, exc.reason, field=nested_field(prefix, exc.field))
        return err

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses with their own __init__ signature (session keys, a template key)
        # must still cross process boundaries (Ray replicas): rebuild without __init__.
        return _rebuild, (type(self), self.args), self.__dict__


def _rebuild(cls: type[MnemorayError], args: tuple[Any, ...]) -> MnemorayError:
    err = cls.__new__(cls)
    err.args = args
    return err


class InvalidInput(MnemorayError, ValueError):
    """A value given by the caller is wrong; ``field`` names it (HTTP 422)."""

    status = 422


class StoreError(InvalidInput):
    """A memory store operation was given bad input; ``field`` names it.

    A damaged store (manifest, segment or index file) raises :class:`StoreCorrupt`
    instead: not the caller's fault."""


class PayloadTooLarge(InvalidInput):
    status = 413


class TooMuchToEmbed(PayloadTooLarge):
    """A synchronous request asks for more embedding than one request may (HTTP 413):
    the message names the limit, the value and the way around it (smaller requests, or
    the queued ingestion)."""


class NotFound(MnemorayError, LookupError):
    """The named session, memory, artifact or user does not exist (HTTP 404)."""

    status = 404

    def __str__(self) -> str:  # LookupError/KeyError would quote the message
        return self.args[0] if self.args else ""


class Conflict(MnemorayError):
    """The request contradicts the current state: exists, stale, ended (HTTP 409)."""

    status = 409


class Unauthorized(MnemorayError):
    """No or an unknown API key (HTTP 401)."""

    status = 401


class Forbidden(MnemorayError):
    """The key is valid but not for this app (HTTP 403)."""

    status = 403


class TooManyRequests(MnemorayError):
    """The caller has too much work pending already: ask again when some of it is done
    (HTTP 429)."""

    status = 429


class Unavailable(MnemorayError):
    """A dependency (model backend, store, replica) cannot answer now (HTTP 503)."""

    status = 503


class StoreCorrupt(MnemorayError):
    """A store's files are damaged or inconsistent: an operator's problem (HTTP 500,
    the details are logged, not sent)."""

    status = 500
    public = False


class ConfigError(InvalidInput):
    """A setting (file, environment, flag) is invalid; ``field`` names it."""


class Unsupported(ConfigError):
    """The configured store backend lacks this feature (compaction on a LanceDB store,
    ...): the message names the feature and the backend; ``field`` the setting (store)."""


__all__ = [
    "Conflict",
    "ConfigError",
    "Forbidden",
    "InvalidInput",
    "MnemorayError",
    "NotFound",
    "PayloadTooLarge",
    "StoreCorrupt",
    "TooManyRequests",
    "TooMuchToEmbed",
    "Unauthorized",
    "Unavailable",
    "Unsupported",
]
