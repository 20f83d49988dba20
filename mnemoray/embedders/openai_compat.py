"""An embedder on any OpenAI-compatible ``/v1/embeddings`` server (vLLM, TEI, Ollama).

Its vectors carry ``openai:<model>`` as their ``model_id``, so a store built with a
local model refuses them, unless the embedder was given that local model as
``parity_with`` and the server's vectors matched it on the same probe set and
threshold the ONNX build must pass; then it carries the local model's id.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import httpx
import numpy as np

from mnemoray.embedders.base import Embedder, EmbedderError
from mnemoray.embedders.onnx import PARITY_MIN_COSINE, PARITY_TEXTS, verify_parity
from mnemoray.embedders.spec import REMOTE_ID_PREFIX
from mnemoray.errors import ConfigError, Unavailable
from mnemoray.http_retry import one_line, retry_delay, retryable, server_message

log = logging.getLogger(__name__)

DEFAULT_BATCH = 32  # TEI's default max_client_batch_size; vLLM and Ollama take more
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 3
_PROBE_TEXT = "mnemoray dimension probe"


class RemoteEmbedderError(Unavailable):
    """The embedding server is unreachable, keeps failing, or answered something that is
    not the embeddings asked for (HTTP 503; the message names the server, so it is
    logged, not sent to API clients)."""

    public = False


def embeddings_endpoint(url: str) -> str:
    """``http://h:8000`` and ``http://h:8000/v1`` -> ``http://h:8000/v1/embeddings``."""
    base = url.rstrip("/")
    if base.endswith("/embeddings"):
        return base
    return base + ("/embeddings" if base.endswith("/v1") else "/v1/embeddings")


class OpenAIEmbedder(Embedder):
    """Embeddings from ``POST <url>/v1/embeddings``, ``batch`` texts per request.

    ``model``: the name the server serves. ``key_env``: the name of the environment
    variable holding the API key (sent as a bearer token; none by default: a key for
    one server is never sent to another by accident). ``api_key``: the key itself, for
    Python callers. 429, 5xx and connection errors are retried ``retries`` times with
    exponential backoff from ``backoff_s`` (honouring Retry-After). The dimension is
    probed once here; every answer is checked against it (row count, dimension,
    finite values). ``parity_with``: a loaded local embedder that the server must
    match (minimum cosine over :data:`PARITY_TEXTS` at batch sizes 1 and 16 at least
    :data:`PARITY_MIN_COSINE`); on success ``model_id`` is that embedder's, otherwise
    the constructor raises :class:`EmbedderError` naming ``parity_with``.
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        key_env: str | None = None,
        api_key: str | None = None,
        batch: int | None = None,
        timeout: float | None = None,
        retries: int | None = None,
        backoff_s: float = 0.5,
        parity_with: Embedder | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise EmbedderError(
                "the name of the model the server serves is required", field="model"
            )
        self.batch = DEFAULT_BATCH if batch is None else batch
        self.retries = DEFAULT_RETRIES if retries is None else retries
        if self.batch < 1:
            raise EmbedderError(f"must be a positive integer, got {self.batch!r}", field="batch")
        if self.retries < 0:
            raise EmbedderError(f"must be an integer >= 0, got {self.retries!r}", field="retries")
        if timeout is not None and not timeout > 0:
            raise EmbedderError(
                f"must be a positive number of seconds, got {timeout!r}", field="timeout"
            )
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise EmbedderError(f"expected http(s)://host[:port], got {url!r}", field="url")
        self.endpoint = embeddings_endpoint(url)
        self.model = model
        self.backoff_s = backoff_s
        if api_key is None and key_env is not None:
            api_key = os.environ.get(key_env) or None
            if api_key is None:
                raise ConfigError(
                    f"the environment variable {key_env} is not set or empty", field="key_env"
                )
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            timeout=DEFAULT_TIMEOUT_S if timeout is None else timeout, headers=headers
        )
        self.model_id = f"{REMOTE_ID_PREFIX}{model}"
        self.dim = 0  # probed next; _vectors checks every later answer against it
        self.parity_min_cosine: float | None = None
        try:
            self.dim = int(self._vectors([_PROBE_TEXT]).shape[1])
            if parity_with is not None:
                self._check_parity(parity_with)
        except BaseException:
            self._client.close()  # refused: nobody else holds this client
            raise

    def _check_parity(self, reference: Embedder) -> None:
        if reference.dim != self.dim:
            raise EmbedderError(
                f"{self.model!r} at {self.endpoint} answers {self.dim} "
                f"dimensions, {reference.model_id!r} has {reference.dim}",
                field="parity_with",
            )
        self.parity_min_cosine = verify_parity(self, reference, PARITY_TEXTS)
        if self.parity_min_cosine < PARITY_MIN_COSINE:
            raise EmbedderError(
                f"{self.model!r} at {self.endpoint} is not "
                f"{reference.model_id!r}: minimum cosine on the parity "
                f"probe set {self.parity_min_cosine:.5f} < {PARITY_MIN_COSINE}",
                field="parity_with",
            )
        self.model_id = reference.model_id

    def close(self) -> None:
        self._client.close()

    def _encode(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        assert batch_size is not None  # not own_batching: encode always passes one
        size = min(batch_size, self.batch)
        return np.concatenate(
            [self._vectors(texts[i : i + size]) for i in range(0, len(texts), size)]
        )

    def _vectors(self, texts: list[str]) -> np.ndarray:
        """One request: (len(texts), dim) float32, checked."""
        body = self._post({"model": self.model, "input": texts})
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != len(texts):
            got = len(data) if isinstance(data, list) else "no"
            raise RemoteEmbedderError(
                f"{self.endpoint} answered {got} embeddings for {len(texts)} inputs"
            )
        if all(isinstance(d, dict) and isinstance(d.get("index"), int) for d in data):
            data = sorted(data, key=lambda d: d["index"])  # the API does not promise order
        rows: list[Any] = [d.get("embedding") if isinstance(d, dict) else None for d in data]
        if not all(isinstance(r, list) for r in rows):
            raise RemoteEmbedderError(
                f"{self.endpoint} answered embeddings that are not "
                f"lists of floats (base64 or another format?)"
            )
        dims = {len(r) for r in rows}
        want = self.dim or next(iter(dims))
        if dims != {want} or want == 0:
            raise RemoteEmbedderError(
                f"{self.endpoint} answered {sorted(dims)}-dimensional "
                f"vectors for {self.model!r}, expected {want}"
            )
        try:
            out = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise RemoteEmbedderError(
                f"{self.endpoint} answered non-numeric embeddings: {one_line(str(exc))}"
            ) from None
        if not np.isfinite(out).all():
            raise RemoteEmbedderError(f"{self.endpoint} answered non-finite values")
        return out

    def _post(self, body: dict[str, Any]) -> Any:
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = self._client.post(self.endpoint, json=body)
            except httpx.TransportError as exc:
                failure = f"{type(exc).__name__}: {one_line(str(exc)) or 'no answer'}"
            else:
                if response.status_code < 400:
                    try:
                        return response.json()
                    except ValueError:
                        raise RemoteEmbedderError(
                            f"{self.endpoint} answered HTTP "
                            f"{response.status_code} without JSON: "
                            f"{one_line(response.text)[:200]!r}"
                        ) from None
                self._refuse(response)  # raises unless worth another try
                failure = f"HTTP {response.status_code}: {server_message(response)}"
            if attempt >= self.retries:
                raise RemoteEmbedderError(
                    f"embedding server {self.endpoint} failed after "
                    f"{attempt + 1} attempt(s): {failure}"
                )
            delay = retry_delay(response, attempt, self.backoff_s)
            log.warning(
                "POST %s failed (%s); retry %d/%d in %.2fs",
                self.endpoint,
                failure,
                attempt + 1,
                self.retries,
                delay,
            )
            time.sleep(delay)
            attempt += 1

    def _refuse(self, response: httpx.Response) -> None:
        status = response.status_code
        if retryable(status):
            return
        said = server_message(response)
        if status in (401, 403):
            raise ConfigError(
                f"{self.endpoint} refused the API key (HTTP {status}): {said}; "
                f"name the variable holding it with key_env=NAME",
                field="key_env",
            )
        if status == 404:
            raise ConfigError(
                f"{self.endpoint} -> HTTP 404: {said} (is url an OpenAI-"
                f"compatible server, and model one it serves?)",
                field="model",
            )
        raise EmbedderError(f"{self.endpoint} refused the request (HTTP {status}): {said}")

    def __repr__(self) -> str:  # no headers: they hold the key
        return f"OpenAIEmbedder({self.endpoint!r}, model={self.model!r}, dim={self.dim})"


__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "OpenAIEmbedder",
    "RemoteEmbedderError",
    "embeddings_endpoint",
]
