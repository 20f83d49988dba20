"""The one token counter used everywhere (compiler, budgets, benchmarks).

``count_tokens`` is an *estimate*, not a tokenizer: one C-level regex pass
that counts letter runs cut into pieces of at most 7 characters, digit runs
cut into pieces of at most 2, each punctuation mark or symbol, and each CJK
character. It was fitted to the all-MiniLM-L6-v2 WordPiece tokenizer
(uncased BERT vocabulary, no [CLS]/[SEP]): on English prose it lands within
about +5% of the real count, on JSON tool payloads and Python source within
about 2%, and ``tests/test_tokens.py`` holds it to 20% of the real tokenizer
over a few hundred English sentences. It counts pieces and never builds them,
so it is cheap enough to run on every event; results for short texts are
memoised because event texts are immutable and recur on every compile.

ASCII text (English prose, JSON, code: most of what is counted) gets the same count
without the regex engine: its characters fall in four classes (letter, digit, mark,
space) taken from the regex itself, and the pieces of a letter run of length L are
ceil(L/7), of a digit run ceil(L/2): C-level byte translations and substring counts,
two to three times as fast on texts of 60 characters and more. A text with a run too
long for those few counts takes the regex.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Order matters: a CJK character is one WordPiece token, so it must be
# matched alone before the letter-run alternative swallows it.
_PIECE = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]"
    r"|[^\W\d_]{1,7}"
    r"|\d{1,2}"
    r"|[^\w\s]|_"
)

# Longer texts (artifacts, big tool payloads) are counted without memoising so
# the cache never pins megabytes of text in memory.
_MEMO_MAX_CHARS = 8192


def _ascii_tables() -> tuple[bytes, bytes, bytes]:
    """Byte translations of ASCII text: letters to ``a``, digits to ``0``, marks (one
    piece each) to ``.``, all else to a space; each class as ``_PIECE`` matches it."""
    letters, digits, marks = bytearray(b" " * 256), bytearray(b" " * 256), bytearray(b" " * 256)
    for code in range(128):
        char = chr(code)
        if re.fullmatch(r"[^\W\d_]", char):
            letters[code] = ord("a")
        elif re.fullmatch(r"\d", char):
            digits[code] = ord("0")
        elif _PIECE.fullmatch(char):
            marks[code] = ord(".")
    return bytes(letters), bytes(digits), bytes(marks)


_LETTERS, _DIGITS, _MARKS = _ascii_tables()
# A run of at least 7k+1 letters (2k+1 digits) after a non-letter (non-digit) holds
# a (k+1)-th piece. A pattern is counted only while the one before it was found, so
# most texts take two or three passes; a text with a run as long as the last pattern
# (56 letters, 20 digits: any float's repr and 64-bit int fit below) takes the regex.
_LETTER_RUNS = tuple(b" " + b"a" * (7 * k + 1) for k in range(8))
_DIGIT_RUNS = tuple(b" " + b"0" * (2 * k + 1) for k in range(10))


def _runs(classes: bytes, patterns: tuple[bytes, ...]) -> int | None:
    """Pieces of the runs ``patterns`` count in ``classes``; None past the last one."""
    total = 0
    for pattern in patterns:
        found = classes.count(pattern)
        if not found:
            return total
        total += found
    return None


def _count(text: str) -> int:
    # (Below ~16 characters the regex is the cheaper of the two.)
    if len(text) >= 16 and text.isascii():
        raw = b" " + text.encode("ascii")
        letters = _runs(raw.translate(_LETTERS), _LETTER_RUNS)
        digits = _runs(raw.translate(_DIGITS), _DIGIT_RUNS)
        if letters is not None and digits is not None:
            return letters + digits + raw.translate(_MARKS).count(b".")
    return len(_PIECE.findall(text))


@lru_cache(maxsize=65536)
def _count_memoised(text: str) -> int:
    return _count(text)


def count_tokens(text: str) -> int:
    """Estimated all-MiniLM-L6-v2 WordPiece tokens in ``text`` (see module doc)."""
    if len(text) > _MEMO_MAX_CHARS:
        return _count(text)
    return _count_memoised(text)
