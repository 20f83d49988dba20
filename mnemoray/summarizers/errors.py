"""Errors raised by summarizer backends (no heavy imports here)."""

from __future__ import annotations

from mnemoray.errors import InvalidInput, MnemorayError, Unavailable


class ModelUnavailableError(Unavailable, RuntimeError):
    """A backend's optional dependency (e.g. vllm) is not installed here."""

    public = False  # the message is an install hint for the operator


class SummaryParseError(MnemorayError, ValueError):
    """A model's output held no usable summary JSON; the message shows an excerpt.

    Not the caller's fault and not for clients to read (an HTTP 500)."""

    public = False


class PromptTooLongError(InvalidInput):
    """The rendered window does not fit the model's context; summarize smaller windows."""


class ModelRequestError(Unavailable, RuntimeError):
    """An HTTP summarizer backend refused or failed a request.

    ``status`` here is the backend's HTTP status (``None`` when no response came
    back at all); the class's own status (503) is what mnemoray's API answers,
    without the message (it names the backend's URL).
    """

    public = False

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        # The backend's status, on the instance by design (the class's is the API's).
        self.status = status  # type: ignore[misc,assignment]
