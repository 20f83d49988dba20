"""Generated sessions for the profile and domain tests: two users of one app over months
(one of them knows birds), and the same user id in another app."""

from __future__ import annotations

from pathlib import Path

from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.backfill.archive import write_archive
from mnemoray.sessions.session import Session
from tests.support.factories import DAY, T0, session

MONTH = 30 * DAY

ALICE = [
    session(
        "a1",
        T0,
        ("u", "My African Grey parrot Kiko is 12 years old and knows 40 words."),
        ("m", "That is a big vocabulary! How do you train her?"),
        ("u", "I train the parrot with clicker sessions, 10 minutes every morning."),
        ("m", "Would you like to talk about your divorce as well?"),
        ("u", "No thanks."),
        user="alice",
    ),
    session(
        "a2",
        T0 + MONTH,
        (
            "u",
            "Kiko the parrot started plucking feathers in March, the vet Dr Ortiz "
            "said it is stress.",
        ),
        ("m", "Plucking often follows boredom. Do you give her foraging toys?"),
        ("u", "Yes, I build foraging toys from cardboard for the parrot every week."),
        user="alice",
    ),
    session(
        "a3",
        T0 + 3 * MONTH,
        ("u", "I joined the Hamburg parrot club in 2023 and give talks on parrot nutrition."),
        ("m", "What do you feed her?"),
        ("u", "Pellets, 20 percent fresh vegetables, and I'd rather not talk about my ex-husband."),
        user="alice",
    ),
    session(
        "a4",
        T0 + 4 * MONTH,
        ("u", "Is sourdough baking hard? I want to try sourdough bread."),
        ("m", "It takes patience; a starter needs a week."),
        ("u", "My grandmother ran a bakery in the 1960s."),
        user="alice",
    ),
]
BOB = [
    session(
        "b1",
        T0 + MONTH,
        ("u", "lol my neighbour's parrot screams all day, gonna buy earplugs"),
        ("m", "Earplugs help. Is the parrot alone a lot?"),
        ("u", "yeah probably, the parrot is alone while they work"),
        user="bob",
    ),
    session(
        "b2",
        T0 + 2 * MONTH,
        ("u", "hey can you give me a sourdough recipe?"),
        ("m", "Sure: flour, water, salt and an active starter."),
        ("u", "cool, how do I keep the starter alive?"),
        ("m", "Feed it flour and water daily."),
        ("u", "ok I will feed the starter after work"),
        user="bob",
    ),
]
# The same user id in another app: never in the first app's profile or index.
ELSEWHERE = [
    session(
        "o1",
        T0,
        ("u", "I sail a catamaran on the Baltic every summer."),
        ("u", "The catamaran regatta in Kiel was windy."),
        user="alice",
        app="other",
    ),
]
SESSIONS: list[Session] = [*ALICE, *BOB, *ELSEWHERE]


def build_store(tmp: Path, sessions: list[Session] | None = None) -> Path:
    """A store made by a real (in-process) backfill of ``sessions`` (default all)."""
    archive = tmp / "archive"
    write_archive(sessions or SESSIONS, archive / "sessions.jsonl")
    store = tmp / "store"
    backfill(
        BackfillConfig(
            archive, store, shards=2, embedder=None, commit_every=2, progress_interval_s=0
        )
    )
    return store
