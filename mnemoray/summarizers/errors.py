"""Errors raised by summarizer backends (no heavy imports here)."""

from __future__ import annotations


class BackendUnavailableError(RuntimeError):
    """A backend's optional dependency (e.g. vllm) is not installed here."""


class SummaryParseError(ValueError):
    """A model's output held no usable summary JSON; the message shows an excerpt."""


class PromptTooLongError(ValueError):
    """The rendered window does not fit the model's context; summarize smaller windows."""


class BackendRequestError(RuntimeError):
    """An HTTP summarizer backend refused or failed a request.

    ``status`` is the HTTP status (``None`` when no response came back at all).
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
