"""The speaker axis: whose words a question asks about, and each record's share of them
(real MiniLM for the ranking case)."""

from __future__ import annotations

import pytest

from mnemoray.embedders import open_embedder
from mnemoray.memory.recall.speakers import asked_side, user_share
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers import ExtractiveSummarizer
from tests.support.factories import T0, session


@pytest.mark.parametrize(
    "query,side",
    [
        ("How many fitness classes do I attend in a typical week?", "user"),
        ("What degree did I graduate with?", "user"),
        ("Where is my sister's new flat?", "user"),
        ("Can you remind me of that Soviet cartoon you mentioned?", "assistant"),
        ("What was the 27th item on the list you gave me?", "assistant"),
        ("I forgot your recommendation for the Lisbon hotel", "assistant"),
        ("Which city hosts the 2028 Olympics?", None),
        # Earlier words asked back, in the past or after "remind me".
        ("What was the move you made after 27. Kg2?", "assistant"),
        ("What did you suggest for the dinner party?", "assistant"),
        ("Can you remind me of the name of that famous deli near the Vatican?", "assistant"),
        ("Can you remind me when my dentist appointment is?", "user"),
        ("Remind me about that flying animal we talked about", "user"),
        ("Remind me to buy milk tomorrow", "user"),
        ("Can you tell me again what the third tip was?", "assistant"),
        ("Did I tell you I made lasagna?", "user"),
        # A request for new words about the user asks about the user.
        ("Can you suggest some activities that I can do in the evening?", "user"),
        ("Can you recommend some resources where I can learn video editing?", "user"),
    ],
)
def test_the_side_a_question_asks_about(query: str, side: str | None) -> None:
    assert asked_side(query) == side


def test_a_records_share_of_the_users_words() -> None:
    chunk = "[2023-05-20] user: I take Zumba on Tuesdays.\n[2023-05-20] assistant: Great!"
    assert user_share("chunk", chunk) == pytest.approx(26 / 32)
    assert user_share("chunk", "[2023-05-20] assistant (part 2/3): Try this.") == 0.0
    # Two people talking: both are the user's side; a key's added lines are no one's.
    talk = "[2023-05-20] Mel: We adopted a cat.\nAna: Lovely!\nTopics: cat, adoption"
    assert user_share("chunk", talk) == 1.0
    assert user_share("session_summary", "User: I moved.\nassistant: Congrats.") < 1.0
    assert user_share("fact", "I moved to Berlin.") == 1.0


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> MemoryService:
    svc = MemoryService(
        MemoryStore(tmp_path_factory.mktemp("speakers") / "store"),
        open_embedder("default"),
        ExtractiveSummarizer(),
    )
    advice = (
        "Here are some weekly fitness class ideas. Spin classes build endurance and "
        "are easy on the joints. Yoga classes help recovery after hard weeks. HIIT "
        "classes burn calories fast in short sessions. Pilates classes strengthen the "
        "core. Dance fitness classes are fun with friends. Swimming classes train the "
        "whole body. Boxing classes relieve stress. Rowing classes build the back."
    )
    svc.add_session(
        session(
            "gym",
            T0,
            ("u", "Can you suggest a playlist for my workouts?"),
            ("m", advice),
            ("u", "By the way, I go to Zumba twice a week and BodyPump on Mondays."),
            ("m", "That is a great routine."),
        )
    )
    return svc


def test_a_question_about_the_user_prefers_the_users_words(service: MemoryService) -> None:
    q = "How many fitness classes do I attend in a week?"
    got = service.search("app", "alice", q, top_k=3)
    assert "Zumba" in got[0].memory.text, [r.memory.text for r in got]
    assert got[0].signals["speaker"] > 0.5
    # The assistant's advice, as close in words, gets less: the user said none of it.
    advice = next(r for r in got if "Pilates" in r.memory.text)
    assert advice.signals["speaker"] < got[0].signals["speaker"]
    # A question about nobody's words in particular has no speaker signal at all.
    assert "speaker" not in service.search("app", "alice", "fitness classes", top_k=1)[0].signals
