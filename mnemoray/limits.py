"""What one input may hold: the same limits for archive rows (batch) and requests (online).

Every entrance checks here: ``Event``, ``Session`` and ``Memory`` (the Python API and
every parse of an archive row or a request body), the archive reader (a row's byte
size, before the expensive parse) and the HTTP schemas (the same numbers). A value
out of range is an :class:`~mnemoray.errors.InvalidInput` (422) naming the field;
a value over a size limit a :class:`~mnemoray.errors.PayloadTooLarge` (413). In a
backfill both put the row in quarantine with that message as its reason.

- Times are epoch seconds, finite, from 1970 up to (not including) year 10000: every
  later step (ISO dates in answers, recall filters, JSON) can represent them.
- Stored JSON (state, event data) is JSON as the standard defines it: no NaN or
  Infinity (they would come back as ``null`` or break every later answer).
- Text is valid Unicode: a lone surrogate (``"\\ud800"`` in JSON) cannot be encoded
  to UTF-8, so nothing downstream (hashes, Parquet, SQLite, answers) could store it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from mnemoray.errors import InvalidInput, PayloadTooLarge, TooMuchToEmbed

#: Valid times: ``TIME_MIN <= t < TIME_MAX`` epoch seconds (10000-01-01T00:00:00Z).
TIME_MIN = 0.0
TIME_MAX = 253_402_300_800.0
#: One event: UTF-8 bytes of its text plus the JSON of its data and state delta.
MAX_EVENT_BYTES = 1 << 20
#: One session (an archive row, a session in a request): its events' bytes together,
#: and the byte size of the row as read, checked before it is parsed.
MAX_ROW_BYTES = 8 << 20
#: Events of one session (an archive row, a session in a request).
MAX_SESSION_EVENTS = 5_000
#: Text of one memory, and of one message to compile (characters).
MAX_MEMORY_TEXT_CHARS = 32_000
MAX_MESSAGE_CHARS = 32_000
#: Memories one forget-by-query preview may list (and its confirm forget).
MAX_FORGET_PREVIEW = 100
#: Characters one synchronous add over HTTP may ask to embed (the default of
#: ``server.max_sync_embed_chars``): the memories' key text, or a session's event text.
#: Embedding is the slow part of an add, and a client waits for it in one request.
MAX_SYNC_EMBED_CHARS = 256_000
SYNC_EMBED_SETTING = "server.max_sync_embed_chars"


def check_time(value: Any, field: str, error: type[InvalidInput] = InvalidInput) -> float:
    """``value`` as float epoch seconds, or ``error`` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(f"expected epoch seconds, got {type(value).__name__}", field=field)
    if not math.isfinite(value):
        raise error(f"must be a finite number of epoch seconds, got {value!r}", field=field)
    if not TIME_MIN <= value < TIME_MAX:
        raise error(
            f"{value!r} is out of range: epoch seconds from {TIME_MIN:g} to "
            f"{TIME_MAX:.0f} (year 10000) are valid",
            field=field,
        )
    return float(value)


def check_optional_time(
    value: Any, field: str, error: type[InvalidInput] = InvalidInput
) -> float | None:
    return None if value is None else check_time(value, field, error)


def _surrogate_message(exc: UnicodeEncodeError) -> str:
    bad = exc.object[exc.start : exc.end]
    return (
        f"not valid Unicode: lone surrogate {ascii(bad)} at position {exc.start} "
        f"(it cannot be encoded as UTF-8)"
    )


def text_bytes(value: str, field: str, error: type[InvalidInput] = InvalidInput) -> int:
    """UTF-8 size of ``value``; ``error`` naming ``field`` if it holds a lone surrogate."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise error(_surrogate_message(exc), field=field) from None


def json_bytes(value: Any, field: str, error: type[InvalidInput] = InvalidInput) -> int:
    """UTF-8 size of ``value`` as JSON; ``error`` naming ``field`` if it holds NaN or
    Infinity or a lone surrogate. Values JSON cannot encode at all (objects of the
    Python API) are measured by their ``repr``: refusing them is not this check's job."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=repr)
    except ValueError as exc:  # NaN / Infinity, or a circular reference
        raise error(f"not valid JSON ({exc}): NaN and Infinity are not JSON", field=field) from None
    except RecursionError:
        raise error("nested too deeply", field=field) from None
    return text_bytes(text, field, error)


def json_object_bytes(
    value: Mapping[str, Any], field: str, error: type[InvalidInput] = InvalidInput
) -> int:
    """:func:`json_bytes` key by key, so the error names the key (``state.score``)."""
    total = 2
    for key, item in value.items():
        name = (f"{field}.{key}" if field else key) if isinstance(key, str) else field
        total += json_bytes(key, name, error) + json_bytes(item, name, error) + 2
    return total


def check_size(
    nbytes: int,
    limit: str,
    what: str,
    field: str | None,
    error: type[InvalidInput] = PayloadTooLarge,
) -> None:
    """``error`` naming the limit (``limit``: a name in this module, ``MAX_ROW_BYTES``)
    when ``nbytes`` exceeds it."""
    value = globals()[limit]
    if nbytes > value:
        raise error(
            f"{what} is {nbytes} bytes, over the limit of {value} bytes (mnemoray.limits.{limit})",
            field=field,
        )


def event_text_chars(events: Any) -> int:
    """Characters of text in ``events`` (``Event`` objects or posted event dicts; what
    a session's distillation embeds, near enough); anything else counts nothing:
    validating it is not this count's job."""
    if not isinstance(events, list | tuple):
        return 0
    total = 0
    for e in events:
        text = e.get("text") if isinstance(e, Mapping) else getattr(e, "text", None)
        if isinstance(text, str):
            total += len(text)
    return total


def check_sync_embed(chars: int, limit: int, field: str, instead: str) -> None:
    """:class:`~mnemoray.errors.TooMuchToEmbed` naming ``field``, the count, the limit
    and ``instead`` (what to do: smaller requests, or the queued ingestion) when
    ``chars`` exceeds ``limit``."""
    if chars > limit:
        raise TooMuchToEmbed(
            f"{chars} characters to embed, over the limit of {limit} for one "
            f"synchronous add ({SYNC_EMBED_SETTING}); {instead}",
            field=field,
        )


__all__ = [
    "MAX_EVENT_BYTES",
    "MAX_MEMORY_TEXT_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_ROW_BYTES",
    "MAX_SESSION_EVENTS",
    "MAX_SYNC_EMBED_CHARS",
    "SYNC_EMBED_SETTING",
    "TIME_MAX",
    "TIME_MIN",
    "check_optional_time",
    "check_size",
    "check_sync_embed",
    "check_time",
    "event_text_chars",
    "json_bytes",
    "json_object_bytes",
    "text_bytes",
]
