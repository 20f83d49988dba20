"""Prompt and parser shared by every LLM summarizer backend.

The model sees numbered transcript lines ``[e<idx>] speaker (date): text`` and
cites those indices in its key facts; ``parse_summary`` maps them back to real
event ids so every fact keeps exact provenance.

Citation policy: a key fact must cite at least one transcript line that was
shown to the model. Citations to lines that do not exist (out of range, or a
skipped partial/control event) are dropped; a fact left with no valid citation
is dropped too and counted in ``ParseReport.dropped_facts``. We never attribute
an uncited fact to "all user events": that would be invented provenance, and
forgetting or auditing a memory by event id relies on provenance being exact.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from mnemoray.sessions.events import Event
from mnemoray.summarizers.base import Fact, Summary
from mnemoray.summarizers.errors import SummaryParseError

log = logging.getLogger(__name__)

MAX_EVENT_CHARS = 1200  # one huge tool dump must not crowd the rest out of the context
EXCERPT_CHARS = 200

# Shared with backends that can constrain decoding to a schema (vLLM guided JSON).
SUMMARY_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "topics": {"type": "array", "items": {"type": "string"}},
        "key_facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "events": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["text", "events"],
            },
        },
        "entities": {"type": "array", "items": {"type": "string"}},
        "open_threads": {"type": "array", "items": {"type": "string"}},
        "decisions": {"type": "array", "items": {"type": "string"}},
        "commitments": {"type": "array", "items": {"type": "string"}},
    },
    "required": [
        "summary",
        "topics",
        "key_facts",
        "entities",
        "open_threads",
        "decisions",
        "commitments",
    ],
}

# The task line; a configured prompt (an app's ``memory_prompt`` / ``compaction_prompt``)
# replaces it, while the transcript and the output format the parser needs stay.
DEFAULT_PROMPT = "You are distilling a conversation into long-term memory for an AI assistant."
_INSTRUCTIONS = """\
{prompt}
Each transcript line starts with its event index in brackets, e.g. [e3].

## Transcript
{transcript}

## Output
Return ONLY one JSON object (no prose, no code fences) with exactly these keys:
{{
  "summary": "2-3 sentences: what happened and what was decided",
  "topics": ["3-5 short topic phrases"],
  "key_facts": [{{"text": "a durable fact about the user", "events": [0]}}],
  "entities": ["people, places, products and organisations that were named"],
  "open_threads": ["questions or tasks left unresolved"],
  "decisions": ["what was decided or agreed"],
  "commitments": ["what someone promised or planned to do, and who"]
}}
Rules:
- key_facts are things worth remembering about the user: preferences, decisions,
  plans, personal details they shared.
- Every key fact lists in "events" the integer indices of the lines that state it.
- Use only what the transcript says; use [] when there is nothing for a key.
"""


# -- rendering ---------------------------------------------------------------
def is_renderable(event: Event) -> bool:
    """Partial (streaming fragments) and control events carry nothing to summarize."""
    if event.partial or event.type == "control":
        return False
    if event.type == "message":
        return bool(event.text.strip())
    return True


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())  # one event per line: newlines would break the numbering
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact_json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _speaker(event: Event) -> str:
    return event.role if event.author == event.role else f"{event.role}:{event.author}"


def _body(event: Event) -> str:
    if event.type == "tool_call":
        return f"called {event.tool_name}({_compact_json(event.data.get('args', {}))})"
    if event.type == "tool_result":
        return f"{event.tool_name} returned {_compact_json(event.data.get('response'))}"
    if event.type == "error":
        return f"error: {event.text or _compact_json(event.data)}"
    if event.type == "compaction":
        return f"summary of earlier events: {event.text or event.data.get('summary', '')}"
    return event.text


def render_line(index: int, event: Event, max_event_chars: int = MAX_EVENT_CHARS) -> str:
    when = datetime.fromtimestamp(event.timestamp, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
    return f"[e{index}] {_speaker(event)} ({when}): {_clip(_body(event), max_event_chars)}"


def citable_event_ids(events: Sequence[Event]) -> dict[int, str]:
    """Transcript index -> event id, for exactly the lines the model is shown."""
    return {i: event.id for i, event in enumerate(events) if is_renderable(event)}


def render_transcript(events: Sequence[Event], max_event_chars: int = MAX_EVENT_CHARS) -> str:
    """Numbered lines; indices are positions in ``events`` so skipped ones leave gaps."""
    return "\n".join(
        render_line(i, event, max_event_chars)
        for i, event in enumerate(events)
        if is_renderable(event)
    )


def build_prompt(
    events: Sequence[Event], max_event_chars: int = MAX_EVENT_CHARS, prompt: str | None = None
) -> str:
    transcript = render_transcript(events, max_event_chars)
    if not transcript:
        raise ValueError(
            f"nothing to summarize: all {len(events)} events are partial, control or empty messages"
        )
    return _INSTRUCTIONS.format(transcript=transcript, prompt=(prompt or DEFAULT_PROMPT).strip())


def build_messages(
    events: Sequence[Event], max_event_chars: int = MAX_EVENT_CHARS, prompt: str | None = None
) -> list[dict[str, str]]:
    # A single user turn: several chat templates (e.g. Gemma) reject a system role.
    return [{"role": "user", "content": build_prompt(events, max_event_chars, prompt)}]


def render_for_tokenizer(
    events: Sequence[Event], tokenizer: Any, prompt: str | None = None
) -> tuple[str, bool]:
    """The model input text, through the tokenizer's chat template when it has one.

    Returns ``(text, templated)``; a templated text already holds its special
    tokens, so callers must not add them again when tokenizing.
    """
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            build_messages(events, prompt=prompt), tokenize=False, add_generation_prompt=True
        )
        return str(text), True
    return build_prompt(events, prompt=prompt), False


# -- JSON recovery -----------------------------------------------------------
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)  # reasoning models' preamble
_FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\n?(.*?)```", re.S)
_KNOWN_KEYS = {
    "summary",
    "topics",
    "key_facts",
    "keyFacts",
    "facts",
    "entities",
    "open_threads",
    "openThreads",
    "decisions",
    "commitments",
}
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_MAX_CANDIDATES = 64


def _next_significant(text: str, i: int) -> str:
    while i < len(text) and text[i].isspace():
        i += 1
    return text[i] if i < len(text) else ""


def _drop_trailing_comma(out: list[str]) -> None:
    k = len(out) - 1
    while k >= 0 and out[k].isspace():
        k -= 1
    if k >= 0 and out[k] == ",":
        del out[k]


def _repair_object(text: str, start: int) -> str | None:
    """The balanced object starting at ``text[start] == '{'``, rewritten as strict JSON.

    Safe repairs only, all outside strings: trailing commas removed, Python
    literals mapped, single-quoted strings re-quoted. A single quote opens a
    string only where a value or key may start, and closes one only before a
    structural character, so apostrophes ("user's") survive. Returns None when
    the object never closes (typically: generation stopped at the token limit).
    """
    out: list[str] = []
    depth, i, n, prev = 0, start, len(text), ""
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                return None
            out.append(text[i : j + 1])
            prev, i = '"', j + 1
            continue
        if c == "'" and prev in ("{", "[", ",", ":"):
            j, buf = i + 1, ['"']
            while j < n:
                ch = text[j]
                if ch == "\\" and j + 1 < n:
                    buf.append("'" if text[j + 1] == "'" else text[j : j + 2])
                    j += 2
                    continue
                if ch == "'" and _next_significant(text, j + 1) in (",", "}", "]", ":"):
                    break
                buf.append('\\"' if ch == '"' else ch)
                j += 1
            if j >= n:
                return None
            out.append("".join(buf) + '"')
            prev, i = '"', j + 1
            continue
        if c.isalpha():
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append(_PY_LITERALS.get(word, word))
            prev, i = word[-1], j
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            _drop_trailing_comma(out)
            depth -= 1
        out.append(c)
        if not c.isspace():
            prev = c
        i += 1
        if depth == 0:
            return "".join(out)
    return None


def _as_summary_object(value: Any) -> dict[str, Any] | None:
    # Requiring a known key keeps a nested key_fact object from passing as the summary.
    return value if isinstance(value, dict) and _KNOWN_KEYS & set(value) else None


def _first_object(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"\{", text)][:_MAX_CANDIDATES]
    for pos in starts:
        try:
            found = _as_summary_object(decoder.raw_decode(text, pos)[0])
        except json.JSONDecodeError:
            found = None
        if found is None:
            repaired = _repair_object(text, pos)
            if repaired is not None:
                try:
                    found = _as_summary_object(json.loads(repaired))
                except json.JSONDecodeError:
                    found = None
        if found is not None:
            return found
    return None


def extract_json_object(raw_text: str) -> dict[str, Any] | None:
    """The first summary-shaped JSON object in a model's output, or None."""
    text = _THINK.sub("", raw_text)
    regions = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for region in regions:
        found = _first_object(region)
        if found is not None:
            return found
    return None


# -- mapping onto Summary ----------------------------------------------------
_CITATION_KEYS = (
    "events",
    "event_ids",
    "source_events",
    "source_event_ids",
    "sources",
    "citations",
    "evidence",
)
_INDEX = re.compile(r"^\[?\s*e?(\d+)\s*\]?$", re.I)
_INLINE_CITATION = re.compile(r"\s*\[\s*e(\d+)\s*\]", re.I)


@dataclass(frozen=True)
class ParseReport:
    summary: Summary
    dropped_facts: int = 0  # facts with no valid citation (or no text)
    dropped_citations: int = 0  # indices that named no transcript line


def _first_key(obj: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in obj:
            return obj[key]
    return None


def _strings(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    seen: dict[str, str] = {}
    for item in items:
        if isinstance(item, dict):  # entities often come as {"name": ..., "type": ...}
            item = _first_key(item, "name", "text", "value")
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            item = str(item)
        if isinstance(item, str) and item.strip():
            seen.setdefault(item.strip().casefold(), item.strip())
    return tuple(seen.values())


def _citation_index(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        m = _INDEX.match(value.strip())
        return int(m.group(1)) if m else None
    return None


def _fact_parts(raw: Any) -> tuple[str, list[Any]]:
    if isinstance(raw, str):
        # Weaker models inline citations: "User owns a parrot [e3]".
        cited: list[Any] = [int(i) for i in _INLINE_CITATION.findall(raw)]
        return _INLINE_CITATION.sub("", raw).strip(), cited
    if isinstance(raw, dict):
        text = _first_key(raw, "text", "fact", "statement")
        text = text.strip() if isinstance(text, str) else ""
        cited = _first_key(raw, *_CITATION_KEYS)
        cited = list(cited) if isinstance(cited, list) else [] if cited is None else [cited]
        cited += [int(i) for i in _INLINE_CITATION.findall(text)]
        return _INLINE_CITATION.sub("", text).strip(), cited
    return "", []


def _excerpt(raw_text: str) -> str:
    flat = " ".join(raw_text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS] + "…"


def parse_summary_report(raw_text: str, events: Sequence[Event]) -> ParseReport:
    """Like ``parse_summary`` but also says what was dropped."""
    obj = extract_json_object(raw_text)
    if obj is None:
        hint = ""
        if raw_text.count("{") > raw_text.count("}"):
            hint = " (unbalanced braces: the output looks truncated; raise the token limit)"
        raise SummaryParseError(
            f"no summary JSON object in model output of {len(raw_text)} "
            f"chars{hint}: {_excerpt(raw_text)!r}"
        )
    summary_text = obj.get("summary")
    if isinstance(summary_text, list):
        summary_text = " ".join(s for s in summary_text if isinstance(s, str))
    if not isinstance(summary_text, str) or not summary_text.strip():
        raise SummaryParseError(
            f"model output has no non-empty 'summary' string: {_excerpt(raw_text)!r}"
        )

    citable = citable_event_ids(events)
    facts: list[Fact] = []
    dropped_facts = dropped_citations = 0
    raw_facts = _first_key(obj, "key_facts", "keyFacts", "facts")
    for raw in raw_facts if isinstance(raw_facts, list) else []:
        text, cited = _fact_parts(raw)
        ids: dict[str, None] = {}
        for value in cited:
            index = _citation_index(value)
            if index in citable:
                ids[citable[index]] = None
            else:
                dropped_citations += 1
        if text and ids:
            facts.append(Fact(text=text, source_event_ids=tuple(ids)))
        else:
            dropped_facts += 1
    if dropped_facts or dropped_citations:
        log.debug(
            "summary parse dropped %d facts and %d citations", dropped_facts, dropped_citations
        )
    summary = Summary(
        # Citation markers belong in key_facts; in the summary text they are noise.
        summary=" ".join(_INLINE_CITATION.sub("", summary_text).split()),
        topics=_strings(obj.get("topics")),
        key_facts=tuple(facts),
        entities=_strings(obj.get("entities")),
        open_threads=_strings(_first_key(obj, "open_threads", "openThreads")),
        source_event_ids=tuple(citable.values()),
        decisions=_strings(obj.get("decisions")),
        commitments=_strings(obj.get("commitments")),
    )
    return ParseReport(summary, dropped_facts, dropped_citations)


def parse_summary(raw_text: str, events: Sequence[Event]) -> Summary:
    """Recover a ``Summary`` from a model's raw output for the window ``events``.

    ``source_event_ids`` of the summary are the events shown to the model;
    each fact keeps only the cited events (see the module docstring).
    Raises ``SummaryParseError`` when no usable JSON object can be recovered.
    """
    return parse_summary_report(raw_text, events).summary
