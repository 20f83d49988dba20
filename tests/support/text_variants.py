"""The same words as another writer (or a hostile one) might put them: the variants the
scan-gate tests (time expressions, graph relations) read their corpora through."""

from __future__ import annotations

import random


def variant(text: str, rng: random.Random) -> str:
    pick = rng.randrange(10)
    if pick == 0:
        return text.upper()
    if pick == 1:
        return text.lower()
    if pick == 2:
        return text.title()
    if pick == 3:  # the letters re and lower() fold onto ASCII ones from outside ASCII
        return text.replace("k", "\u212a").replace("s", "\u017f").replace("i", "\u0131")
    if pick == 4:
        return text.replace("I", "\u0130").replace("i", "\u0130")
    if pick == 5:  # digits \d matches that are not ASCII
        return text.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    if pick == 6:
        return text.translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    if pick == 7:
        return text.replace(" ", rng.choice(("  ", "\t", "\n", "\u00a0")))
    if pick == 8:
        return text.replace("'", "\u2019")
    return text
