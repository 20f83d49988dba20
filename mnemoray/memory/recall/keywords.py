"""The keyword index's terms: Unicode words, Snowball stems, CJK character n-grams.

    tok = KeywordTokenizer()                 # language "auto": told per text
    tok.terms("Ich wohne in München")        # ['wohn', 'munch']
    tok.terms("我住在北京")                    # ['住', '北', '京', '我住', '住在', '在北', '北京']
    tok.query_terms("München", {"german", "english"})   # {'munch', 'münchen'}

- Words are runs of Unicode letters and digits (NFKC, case-folded), so ``München``
  is one word. French/Italian elisions (``l'amour``) keep the word after the
  apostrophe.
- Chinese, Japanese and Korean have no spaces between words: a run of their
  characters gives its single characters (the most frequent dropped) and every
  pair of neighbours, so a two-character word matches as a whole.
- Each other word is stemmed by Snowball (PyStemmer) in the language of its text:
  ``language`` names one for every text, or ``auto`` tells it per text from its
  function words and letters (English when nothing says otherwise). Cyrillic,
  Greek and Arabic words are stemmed by their script's stemmer. The text's
  language's stopwords are dropped.
- A query is short and often names no language. Its words are stemmed in every
  language the indexed documents were in, so ``Bücher`` finds a German text's
  ``buch`` even when the query alone reads as English; and its stopwords are those of
  its own language only when the documents are in it too (``door`` is a Dutch function
  word, and an English word to look for in English documents).

The index carries :data:`TOKENIZER_VERSION` and its tokenizer: it is built from the
stored texts when a store is read (never persisted), and a query is cut by the same
tokenizer as the documents it searches, so terms of two tokenizers never meet.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import Stemmer

from mnemoray.errors import InvalidInput
from mnemoray.memory.recall.stopwords import CJK_STOP_CHARS, LETTERS, SIGNS, STOPWORDS

# Bumped whenever the terms of a text change (tokenization, stemming, stopwords): an
# index records it, and one built under another version is never queried.
TOKENIZER_VERSION = 2  # 1: ASCII words and a light English suffix stripper
AUTO = "auto"
DEFAULT_LANGUAGE = "english"
# Languages ``auto`` tells apart (those with stopword lists), in tie-break order.
DETECTED = ("english", "german", "french", "spanish", "italian", "dutch", "portuguese")
LANGUAGES: frozenset[str] = frozenset(Stemmer.algorithms())

_CJK = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
)
# A CJK run, or a word: letters/digits other than CJK, with inner apostrophes.
_TOKEN_RE = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+(?:'[^\W_{_CJK}]+)*)")
_WORD_RE = re.compile(rf"[^\W_{_CJK}]+")
_CJK_RE = re.compile(rf"[{_CJK}]")
_ELISIONS = frozenset(
    {
        "l",
        "d",
        "j",
        "m",
        "n",
        "s",
        "t",
        "c",
        "qu",
        "jusqu",
        "lorsqu",
        "puisqu",
        "quoiqu",
        "dell",
        "all",
        "dall",
        "nell",
        "sull",
        "un",
    }
)
_SCRIPTS = (
    ("russian", re.compile(r"[\u0400-\u04ff]")),
    ("greek", re.compile(r"[\u0370-\u03ff]")),
    ("arabic", re.compile(r"[\u0600-\u06ff]")),
)


class KeywordLanguageError(InvalidInput):
    """A language the keyword index cannot stem."""


def check_language(language: str, field: str = "keyword_language") -> str:
    if language != AUTO and language not in LANGUAGES:
        raise KeywordLanguageError(
            f"{language!r} is not {AUTO!r} or a Snowball language: {', '.join(sorted(LANGUAGES))}",
            field=field,
        )
    return language


_stemmers = threading.local()  # a PyStemmer object is not safe across threads


def _stem(words: list[str], language: str) -> list[str]:
    cache = _stemmers.__dict__.setdefault("by_language", {})
    stemmer = cache.get(language)
    if stemmer is None:
        stemmer = cache[language] = Stemmer.Stemmer(language)
    return stemmer.stemWords(words)


def _normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")


def _split(text: str) -> tuple[list[str], list[str]]:
    """(words, CJK terms) of normalised ``text``."""
    if "'" not in text and not _CJK_RE.search(text):  # most text: words alone
        return _WORD_RE.findall(text), []
    words: list[str] = []
    grams: list[str] = []
    for cjk, word in _TOKEN_RE.findall(text):
        if cjk:
            grams.extend(c for c in cjk if c not in CJK_STOP_CHARS)
            grams.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
            continue
        head, sep, tail = word.partition("'")
        words.append(tail if sep and head in _ELISIONS and tail else word)
    return words, grams


# word -> indexes into DETECTED of the languages it is a function word of; same for letters.
_SIGN_OF: dict[str, tuple[int, ...]] = {}
_LETTER_OF: dict[str, tuple[int, ...]] = {}
for _i, _lang in enumerate(DETECTED):
    for _w in SIGNS[_lang]:
        _SIGN_OF[_w] = (*_SIGN_OF.get(_w, ()), _i)
    for _ch in LETTERS.get(_lang, ""):
        _LETTER_OF[_ch] = (*_LETTER_OF.get(_ch, ()), _i)


def detect_language(words: list[str], text: str, default: str = DEFAULT_LANGUAGE) -> str:
    """The Snowball language of a text's Latin-script words: most function words of a
    language (a letter only that language uses counts half), ``default`` when none."""
    scores = [0.0] * len(DETECTED)
    for w in words:
        for i in _SIGN_OF.get(w, ()):
            scores[i] += 1.0
    if not text.isascii():
        for ch in text:
            for i in _LETTER_OF.get(ch, ()):
                scores[i] += 0.5
    best = max(range(len(DETECTED)), key=lambda i: (scores[i], -i))  # ties: earlier
    return DETECTED[best] if scores[best] > 0 else default


def _script(word: str) -> str | None:
    for lang, pattern in _SCRIPTS:
        if pattern.search(word):
            return lang
    return None


def _stop_in_query(word: str, own: str, languages: set[str]) -> bool:
    """Whether a query's ``word`` is a stopword to drop. A short query's language is a
    guess, and its only evidence may be the word itself ("door", "hat", "van" are
    function words in Dutch or German): when that guess is none of the searched
    documents' languages, only their stopwords count, so an English word is never
    dropped for being a function word elsewhere."""
    if not languages or own in languages:
        return word in STOPWORDS.get(own, frozenset())
    return all(word in STOPWORDS.get(lang, frozenset()) for lang in languages)


@dataclass(frozen=True)
class KeywordTokenizer:
    """Terms of texts for the keyword index (see the module). ``language``: ``auto``
    (per text) or a Snowball language name for every text."""

    language: str = AUTO

    def __post_init__(self) -> None:
        check_language(self.language)

    @property
    def version(self) -> str:
        return f"{TOKENIZER_VERSION}:{self.language}"

    def language_of(self, words: list[str], text: str) -> str:
        return detect_language(words, text) if self.language == AUTO else self.language

    def analyze(self, text: str) -> tuple[list[str], str]:
        """A document's terms (stopwords dropped, words stemmed) and its language."""
        norm = _normal(text)
        words, grams = _split(norm)
        lang = self.language_of(words, text.lower())  # before case folding turns ß to ss
        stop = STOPWORDS.get(lang, frozenset())
        return self._stemmed([w for w in words if w not in stop], lang) + grams, lang

    def terms(self, text: str) -> list[str]:
        return self.analyze(text)[0]

    def query_terms(self, text: str, languages: Iterable[str] = ()) -> set[str]:
        """A query's distinct terms: each word stemmed in the query's own language and
        in each of ``languages`` (those of the documents it searches)."""
        norm = _normal(text)
        words, grams = _split(norm)
        own = self.language_of(words, text.lower())
        languages = set(languages)
        words = [w for w in words if not _stop_in_query(w, own, languages)]
        out = set(grams)
        for lang in {own, *languages}:
            out.update(self._stemmed(words, lang))
        return out

    @staticmethod
    def _stemmed(words: list[str], language: str) -> list[str]:
        """``words`` stemmed in ``language`` (Snowball leaves numbers as they are);
        Cyrillic, Greek and Arabic words by their script's stemmer."""
        out = _stem(words, language)
        for i, w in enumerate(words):
            script = None if w.isascii() else _script(w)
            if script is not None:
                out[i] = _stem([w], script)[0]
        return out


__all__ = [
    "AUTO",
    "LANGUAGES",
    "TOKENIZER_VERSION",
    "KeywordLanguageError",
    "KeywordTokenizer",
    "check_language",
    "detect_language",
]
