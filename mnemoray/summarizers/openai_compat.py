"""Summarizer over any OpenAI-compatible ``/chat/completions`` server (OpenAI, vLLM, ...)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from mnemoray.errors import InvalidInput
from mnemoray.http_retry import retry_delay as _retry_delay
from mnemoray.http_retry import retryable
from mnemoray.http_retry import server_message as _server_message
from mnemoray.sessions.events import Event
from mnemoray.summarizers.base import Summarizer
from mnemoray.summarizers.errors import ModelRequestError
from mnemoray.summarizers.llm_base import Completion, LLMSummarizer
from mnemoray.summarizers.llm_prompt import build_messages

log = logging.getLogger(__name__)


class OpenAISummarizer(LLMSummarizer):
    """One chat completion per window; windows of a batch are sent concurrently.

    JSON mode (``response_format={"type": "json_object"}``) is requested by
    default; a server that rejects the field with a 400 is asked again
    without it, and not asked for it again. 429 and 5xx responses and
    transport errors are retried up to ``max_retries`` times with
    exponential backoff (honouring Retry-After); other 4xx raise
    ``ModelRequestError`` naming the status and the server's message.
    """

    name = "openai"
    limit_option = "max_tokens"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_mode: bool = True,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        concurrency: int = 4,
        fallback: Summarizer | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(fallback)
        if not base_url.startswith(("http://", "https://")):
            raise InvalidInput(
                f"expected http(s)://host[:port]/v1, got {base_url!r}", field="base_url"
            )
        if not model:
            raise InvalidInput(
                "a model name is required (the server's served model id)", field="model"
            )
        if max_retries < 0 or concurrency < 1:
            raise InvalidInput("max_retries must be >= 0 and concurrency >= 1")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.model_id = f"openai:{model}"
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.json_mode = json_mode
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.concurrency = concurrency
        self.extra_body = dict(extra_body or {})
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAISummarizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request_body(self, events: Sequence[Event]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": build_messages(events, prompt=self.prompt),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            **self.extra_body,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def _complete(self, batches: Sequence[Sequence[Event]]) -> list[Completion]:
        bodies = [self.request_body(events) for events in batches]  # fail fast on empty windows
        if len(bodies) == 1 or self.concurrency == 1:
            return [self._send(body) for body in bodies]
        # Concurrent requests let a vLLM server batch them on the GPU.
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(bodies))) as pool:
            return list(pool.map(self._send, bodies))

    def _send(self, body: dict[str, Any]) -> Completion:
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = self._client.post(self.url, json=body)
            except httpx.TransportError as exc:
                if attempt >= self.max_retries:
                    raise ModelRequestError(
                        f"POST {self.url} failed after {attempt + 1} attempts: {exc!r}"
                    ) from exc
            else:
                if response.status_code < 400:
                    return self._completion(response)
                status = response.status_code
                if (
                    status == 400
                    and "response_format" in body
                    and "response_format" in _server_message(response)
                ):
                    log.info("%s rejects response_format; continuing without JSON mode", self.url)
                    self.json_mode = False
                    body = {k: v for k, v in body.items() if k != "response_format"}
                    continue
                if not retryable(status):
                    raise ModelRequestError(
                        f"POST {self.url} -> HTTP {status}: {_server_message(response)}", status
                    )
                if attempt >= self.max_retries:
                    raise ModelRequestError(
                        f"POST {self.url} -> HTTP {status} after "
                        f"{attempt + 1} attempts: "
                        f"{_server_message(response)}",
                        status,
                    )
            delay = _retry_delay(response, attempt, self.backoff_s)
            log.warning(
                "POST %s failed (%s); retry %d/%d in %.2fs",
                self.url,
                response.status_code if response is not None else "transport error",
                attempt + 1,
                self.max_retries,
                delay,
            )
            time.sleep(delay)
            attempt += 1

    def _completion(self, response: httpx.Response) -> Completion:
        try:
            choice = response.json()["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ModelRequestError(
                f"POST {self.url}: not a chat completion response: "
                f"{' '.join(response.text.split())[:300]!r}",
                response.status_code,
            ) from exc
        if not isinstance(content, str):
            raise ModelRequestError(
                f"POST {self.url}: the completion has no text content "
                f"(finish_reason={choice.get('finish_reason')!r})",
                response.status_code,
            )
        return Completion(text=content, truncated=choice.get("finish_reason") == "length")
