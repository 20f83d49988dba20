"""The extractive summarizer's phrase count (``_phrases``, behind its topics) equals the
per-phrase loop it replaced, on generated conversations and hostile word runs."""

from __future__ import annotations

import random
from collections import Counter

from benchmarks.datagen import DatasetConfig, generate
from benchmarks.longconv_data import LongConvConfig
from benchmarks.longconv_data import generate as generate_longconv
from mnemoray.sessions.events import Event, user_message
from mnemoray.summarizers import extractive
from mnemoray.summarizers.extractive import _MODIFIERS, ExtractiveSummarizer, _is_topic_word
from mnemoray.text import stem, words


def reference(sentences: list) -> tuple:
    """The loop ``_phrases`` replaced, as it was."""
    counts: Counter = Counter()
    first_seen: dict = {}
    surfaces: dict = {}
    where: dict = {}
    for s in sentences:
        if not s.is_message:
            continue
        keep = [w if _is_topic_word(w) or w in _MODIFIERS else None for w in words(s.text)]
        for j in range(len(keep)):
            for size in range(1, 4):
                gram = keep[j : j + size]
                if len(gram) < size or None in gram:
                    break
                if gram[-1] in _MODIFIERS:
                    continue
                key = tuple(stem(g) for g in gram)
                counts[key] += 1
                surfaces.setdefault(key, Counter())[" ".join(gram)] += 1
                first_seen.setdefault(key, len(first_seen))
                where.setdefault(key, []).append(s.position)
    return counts, first_seen, surfaces, where


def conversations() -> list[list[Event]]:
    out = [s.events for s in generate(DatasetConfig(users=10, sessions_per_user=5)).sessions]
    out += [s.events for s in generate_longconv(LongConvConfig(pairs=2, sessions=4)).sessions]
    rng = random.Random(5)
    vocab = [
        *sorted(_MODIFIERS)[:12],
        "flat",
        "flats",
        "parrot",
        "parrots",
        "the",
        "a",
        "42",
        "booking",
        "booked",
        "it's",
        "Lisbon",
        "rua",
        "das",
        "flores",
        "new",
        "small",
    ]
    for _ in range(60):  # runs of modifiers, stopwords, digits and topic words
        text = " ".join(rng.choice(vocab) for _ in range(rng.randrange(1, 30))) + "."
        out.append([user_message(text), user_message(text.upper())])
    return out


def _as_lists(result: tuple) -> tuple:
    counts, first_seen, surfaces, where = result
    return (
        list(counts.items()),
        list(first_seen.items()),
        [(k, list(v.items())) for k, v in surfaces.items()],
        list(where.items()),
    )


def test_phrases_equal_the_old_loop() -> None:
    summarizer = ExtractiveSummarizer()
    phrases = 0
    for events in conversations():
        content = [e for e in events if not e.partial and e.type not in extractive._SKIPPED_TYPES]
        sentences = summarizer._sentences(content)
        got = extractive._phrases(sentences)
        # Same keys, counts, surface forms and sentences, in the same insertion order.
        assert _as_lists(got) == _as_lists(reference(sentences))
        phrases += len(got[0])
    assert phrases > 1000  # the corpus does hold phrases
