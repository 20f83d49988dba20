"""Which failures of an outside source a compile survives, and how they are reported.

A compile reads long-term memory (the store, the query embedder, a shard's replica)
only to enrich the request; the conversation itself comes from the session. When
that source fails, answering the model call without memories beats failing it, so
the step is skipped and named in the trace. The error's class decides, as it
decides the HTTP status (:mod:`mnemoray.errors`):

- degrade: a server-side class (status 5xx: ``StoreCorrupt``, ``Unavailable``, a
  model backend's failure), an embedder's or a store's refusal (``EmbedderError``,
  ``StoreError``: the step built those inputs itself, from a request already
  validated, so a refusal means a misconfigured model or damaged files, not a bad
  request), and any exception that is not a library error (a bug or a crash in a
  dependency: still not the caller's fault).
- raise: any other library error with a 4xx status (``InvalidInput`` naming a
  request field, ``NotFound``, ``Forbidden`` ...). It says the request is wrong, and
  the same request would fail the same way next time; hiding it behind a 200 would
  hand the caller a silently different answer instead of telling it what to fix.
"""

from __future__ import annotations

from mnemoray.compiler.request import StepError
from mnemoray.errors import MnemorayError

MAX_MESSAGE_CHARS = 200
WITHHELD = "details withheld; the server logged them"


def _dependency_refusals() -> tuple[type[MnemorayError], ...]:
    # Imported on a failure only: the compiler itself never loads numpy or the stores.
    from mnemoray.embedders.base import EmbedderError
    from mnemoray.errors import StoreError

    return EmbedderError, StoreError


def library_error(exc: BaseException) -> BaseException:
    """The library error inside a wrapper that carries it as ``cause`` (a Ray task
    error from another replica), else ``exc``."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, MnemorayError) else exc


def degradable(exc: BaseException) -> bool:
    """Whether a compile step may skip its outside source on ``exc`` (see top)."""
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: never swallowed
        return False
    err = library_error(exc)
    if not isinstance(err, MnemorayError):
        return True
    return type(err).status >= 500 or isinstance(err, _dependency_refusals())


def step_error(step: str, exc: BaseException) -> StepError:
    """``exc`` as the trace shows it: class name, and the message only when it is
    public (a ``StoreCorrupt`` names the store's path; a bug's text may hold anything)."""
    err = library_error(exc)
    # An embedder's or store's message names model paths and file shapes: withheld too.
    public = (
        isinstance(err, MnemorayError)
        and type(err).public
        and not isinstance(err, _dependency_refusals())
    )
    message = str(err)[:MAX_MESSAGE_CHARS] if public else WITHHELD
    return StepError(step, type(err).__name__, message)
