"""Text normalisation shared by the extractive summarizer and compaction boundaries.

The keyword index has its own Unicode tokenizer with Snowball stemming
(:mod:`mnemoray.memory.recall.keywords`); ``STOPWORDS`` here is its English list.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Letters and digits of any script (``münchen`` is one word); ASCII text splits as before.
_WORD_RE = re.compile(r"[^\W_]+(?:'[^\W\d_]+)?")
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")

_STOPWORD_TEXT = """
a about above after again against all also am an and any are aren't as at be because been
before being below between both but by can can't could couldn't did didn't do does doesn't
doing don't down during each few for from further get got had hadn't has hasn't have haven't
having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
i'm i've if in into is isn't it it's its itself just let's like me more most mustn't my
myself no nor not now of off on once only or other ought our ours ourselves out over own
please same shan't she she'd she'll she's should shouldn't so some such than that that's the
their theirs them themselves then there there's these they they'd they'll they're they've
this those through to too under until up us very was wasn't we we'd we'll we're we've were
weren't what what's when when's where where's which while who who's whom why why's will with
won't would wouldn't yes yet you you'd you'll you're you've your yours yourself yourselves
okay ok sure thanks thank really well want know think tell remind remember talked talk said
say
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_RE.split(text) if s and s.strip()]


def words(text: str) -> list[str]:
    """Lower-cased word tokens (apostrophes kept inside words)."""
    return _WORD_RE.findall(text.lower())


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper: enough to match parrot/parrots, booking/booked."""
    if len(word) <= 4 or word.isdigit():
        return word
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)] + keep
    return word


def terms(text: str) -> list[str]:
    """Content terms (summarizer, topic shifts): stopwords dropped, words stemmed."""
    return [stem(w) for w in words(text) if w not in STOPWORDS]
