"""Topic terms of a text: the keyword index's terms, with a word to show for each.

A topic is a term of the keyword index (:class:`~mnemoray.memory.recall.keywords.
KeywordTokenizer`: Snowball stems in the text's language, its stopwords dropped), so
"parrots" and "parrot" are one topic; it is shown as the word the user used most for
it. Words the summarizer never takes for a topic (chat filler, bare modifiers such as
"small": :mod:`mnemoray.summarizers.extractive`) are no topic here either.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from functools import lru_cache

from mnemoray.memory.recall.keywords import KeywordTokenizer, detect_language
from mnemoray.summarizers.extractive import _MODIFIERS, _is_topic_word
from mnemoray.text import words

MIN_TERM_CHARS = 3
# Besides the summarizer's fillers: frequent verbs, quantifiers, time units and chat
# markers, which say how or when something was said, never what it was about.
_NOT_TOPICS = frozenset(
    {
        "every",
        "each",
        "give",
        "gave",
        "given",
        "gives",
        "take",
        "took",
        "put",
        "keep",
        "start",
        "started",
        "try",
        "tried",
        "want",
        "wanted",
        "buy",
        "bought",
        "build",
        "built",
        "come",
        "came",
        "went",
        "gone",
        "use",
        "used",
        "find",
        "found",
        "feel",
        "felt",
        "alone",
        "day",
        "days",
        "week",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "time",
        "times",
        "morning",
        "evening",
        "night",
        "hour",
        "hours",
        "minute",
        "minutes",
        "gonna",
        "wanna",
        "gotta",
        "lol",
        "haha",
        "omg",
        "btw",
        "tbh",
        "kinda",
        "sorta",
        "stuff",
        "yes",
        "sure",
        "hard",
        "easy",
        "new",
        "old",
        "big",
        "lots",
        "percent",
        "since",
        "ago",
    }
)
_local = threading.local()  # tokenizers per thread (PyStemmer objects are per thread)


def _tokenizer(language: str) -> KeywordTokenizer:
    cache = _local.__dict__.setdefault("by_language", {})
    tok = cache.get(language)
    if tok is None:
        tok = cache[language] = KeywordTokenizer(language)
    return tok


@lru_cache(maxsize=65536)
def term_of(word: str, language: str) -> str | None:
    """The index term of one lower-cased ``word`` in ``language``; None: no topic."""
    if (
        not _is_topic_word(word) or word in _MODIFIERS or word in _NOT_TOPICS or word[0].isdigit()
    ):  # "1960s", "3rd": times and counts, not topics
        return None
    found = _tokenizer(language).terms(word)
    if len(found) != 1 or len(found[0]) < MIN_TERM_CHARS or found[0].isdigit():
        return None
    return found[0]


def language_of(texts: Iterable[str]) -> str:
    """The Snowball language of a user's texts, told once over all of them: one short
    turn ("Anna visited me in Paris") can read as another language, and would stem
    a topic differently from the rest."""
    joined = "\n".join(texts)
    return detect_language(words(joined), joined.lower())


def topic_terms(
    text: str, exclude: Collection[str] = (), language: str | None = None
) -> dict[str, str]:
    """Term -> the word it was read from, once per term, in order of appearance.
    ``exclude``: lower-cased words that are no topic here (people's names);
    ``language``: of the text (None: told from the text)."""
    found = words(text)
    language = language or detect_language(found, text.lower())
    out: dict[str, str] = {}
    for w in found:
        if w in exclude:
            continue
        term = term_of(w, language)
        if term is not None and term not in out:
            out[term] = w
    return out


def words_of(question: str, n: int = 3) -> str:
    """The first ``n`` topic words of a text, as one phrase ("" when none)."""
    return " ".join(list(topic_terms(question).values())[:n])


__all__ = ["language_of", "term_of", "topic_terms", "words_of"]
