from __future__ import annotations

import pickle

import pytest

from mnemoray.embedders import Embedder, open_embedder
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message
from mnemoray.summarizers import (
    ExtractiveSummarizer,
    Summarizer,
    Summary,
    available_summarizers,
    get_summarizer,
    register_summarizer,
)


def parrot_apartment() -> list[Event]:
    return [
        user_message("Hi! I'm Sam and I live in Lisbon with my parrot Kiwi.", id="u1"),
        model_message("assistant", "Nice to meet you, Sam. Parrots are great companions.", id="m1"),
        user_message(
            "I'm looking for a new apartment in Porto. My budget is 1,200 EUR a month.", id="u2"
        ),
        model_message(
            "assistant",
            "Porto has many apartments in that range. Do you need a "
            "pet-friendly apartment for your parrot?",
            id="m2",
        ),
        user_message(
            "Yes, the apartment must allow pets. Kiwi is loud in the morning. I prefer a balcony.",
            id="u3",
        ),
        tool_call(
            "assistant",
            "search_apartments",
            {"city": "Porto", "max_rent_eur": 1200, "pets": True},
            call_id="c1",
            id="t1",
        ),
        tool_result(
            "search_apartments",
            "search_apartments",
            {"results": [{"street": "Rua das Flores 12", "rent_eur": 1100}]},
            call_id="c1",
            id="t2",
        ),
        model_message(
            "assistant",
            "I found a pet-friendly apartment on Rua das Flores for 1,100 EUR with a balcony.",
            id="m3",
        ),
        user_message(
            "My parrot needs a quiet apartment. Is the Rua das Flores apartment close "
            "to a vet for parrots?",
            id="u4",
        ),
    ]


def test_summary_is_deterministic() -> None:
    a = ExtractiveSummarizer().summarize(parrot_apartment())
    b = ExtractiveSummarizer().summarize(list(parrot_apartment()))
    assert a == b
    assert a.to_dict() == Summary.from_dict(a.to_dict()).to_dict()


def test_summary_keeps_central_sentences_in_order_and_labels_speakers() -> None:
    summary = ExtractiveSummarizer().summarize(parrot_apartment())
    lines = summary.summary.splitlines()
    assert lines and all(line.split(": ", 1)[0] in {"User", "assistant"} for line in lines)
    assert "parrot" in summary.summary.lower() and "apartment" in summary.summary.lower()
    # Original order is kept: the opening self-introduction comes before the listing found.
    text = summary.summary
    assert text.index("Lisbon") < text.index("Rua das Flores")
    assert "Great." not in text


def test_length_budget_is_respected() -> None:
    events = parrot_apartment()
    short = ExtractiveSummarizer(max_chars=160, max_sentences=10).summarize(events)
    assert 0 < len(short.summary) <= 160
    few = ExtractiveSummarizer(max_sentences=2).summarize(events)
    assert len([s for s in few.summary.replace("\n", " ").split(". ") if s]) <= 2


def test_redundant_sentences_are_not_repeated() -> None:
    events = [user_message("My parrot Kiwi loves sunflower seeds.", id=f"u{i}") for i in range(3)]
    events.append(user_message("The landlord allows pets in the apartment.", id="u9"))
    summary = ExtractiveSummarizer().summarize(events)
    assert summary.summary.count("sunflower") == 1
    assert "landlord" in summary.summary


def test_topics_make_sense_on_a_parrot_apartment_conversation() -> None:
    topics = ExtractiveSummarizer().summarize(parrot_apartment()).topics
    assert topics[0] == "apartment"
    assert "parrot" in topics[:3]
    assert "rua das flores" in topics  # a repeated multi-word phrase beats its parts
    assert "flores" not in topics and "das flores" not in topics
    assert not {"hi", "great", "yes", "need", "i'm"} & set(topics)


def test_key_facts_are_user_self_disclosures_with_provenance() -> None:
    facts = ExtractiveSummarizer().summarize(parrot_apartment()).key_facts
    by_text = {f.text: f.source_event_ids for f in facts}
    assert by_text["I'm Sam and I live in Lisbon with my parrot Kiwi."] == ("u1",)
    assert by_text["My budget is 1,200 EUR a month."] == ("u2",)
    assert by_text["I prefer a balcony."] == ("u3",)
    assert by_text["My parrot needs a quiet apartment."] == ("u4",)
    # Model turns and questions are never facts about the user.
    assert not any("Parrots are great" in t or t.endswith("?") for t in by_text)


@pytest.mark.parametrize(
    "text,is_fact",
    [
        ("I'm allergic to peanuts.", True),
        ("Oh, and I work as a nurse at night.", True),
        ("I hate early flights.", True),
        ("I plan to move in June.", True),
        ("I usually prefer trains.", True),
        ("My daughter's name is Ana.", True),
        ("my daughter's name is Ana.", True),
        ("I'm thinking about getting a pet parrot.", True),
        ("I really like African Grey parrots because they can talk.", True),
        ("My apartment is small though.", True),
        ("I moved to Madrid in March.", True),
        ("I will start a new job next week.", True),
        ("I'll be in Rome from the 3rd to the 9th.", True),
        ("I was wondering about the price.", False),
        ("I'm not sure about that.", False),
        ("I'd like to know the price.", False),
        ("Do I have any bookings?", False),
        ("The weather is nice.", False),
        # A statement names something beside its opening words, after a lead-in too.
        ("Big news: I moved to Berlin last month for a new job.", True),
        ("If I get the job, I'll move to Berlin.", False),  # a condition is no fact
        ("I love it.", False),
        ("Thanks, I will.", False),
        # What happened to the user, in the past, alone or with someone.
        ("I just finished reading Project Hail Mary and I couldn't put it down.", True),
        ("I found out I'm allergic to pollen.", True),
        ("I signed up for a ceramics class on Thursday evenings.", True),
        ("Felix and I went kayaking together.", True),
        ("My brother and I went up the coast.", True),
        ("I needed that.", False),
        ("I wondered.", False),
    ],
)
def test_first_person_fact_patterns(text: str, is_fact: bool) -> None:
    facts = ExtractiveSummarizer().summarize([user_message(text, id="u")]).key_facts
    assert bool(facts) is is_fact
    if is_fact:
        assert facts[0].source_event_ids == ("u",)


def test_repeated_fact_keeps_every_source_event() -> None:
    events = [
        user_message("I'm vegetarian.", id="a"),
        model_message("bot", "Noted.", id="b"),
        user_message("Again: I'm vegetarian.", id="c"),
        user_message("I'm vegetarian.", id="d"),
    ]
    facts = ExtractiveSummarizer().summarize(events).key_facts
    # Said three times (once after a lead-in): one fact citing all three.
    assert [(f.text, f.source_event_ids) for f in facts] == [("I'm vegetarian.", ("a", "c", "d"))]


def test_entities_are_names_and_quantities_not_sentence_starts() -> None:
    entities = ExtractiveSummarizer().summarize(parrot_apartment()).entities
    for expected in ("Sam", "Lisbon", "Kiwi", "Porto", "Rua das Flores", "1,200 EUR", "1,100 EUR"):
        assert expected in entities
    assert not {"Hi", "Nice", "Yes", "I'm", "EUR", "My", "Parrots"} & set(entities)


def test_open_threads_are_unanswered_questions_and_pending_calls() -> None:
    events = parrot_apartment() + [
        tool_call("assistant", "find_vets", {"near": "Rua das Flores"}, call_id="c2", id="t3"),
    ]
    threads = ExtractiveSummarizer().summarize(events).open_threads
    assert threads == (
        "Unanswered question: Is the Rua das Flores apartment close to a vet for parrots?",
        "Pending tool call: find_vets(near=Rua das Flores)",
    )
    # The model's earlier question and the answered call c1 are not open.
    answered = events + [model_message("assistant", "Yes, a vet is 200 m away.", id="m9")]
    assert ExtractiveSummarizer().summarize(answered).open_threads == (
        "Pending tool call: find_vets(near=Rua das Flores)",
    )


def test_tool_events_are_rendered_briefly() -> None:
    big = {"rows": [{"id": i, "note": "x" * 50} for i in range(200)]}
    events = [
        user_message("Find me flights from Berlin to Lisbon in May.", id="u"),
        tool_call(
            "agent",
            "search_flights",
            {"origin": "Berlin", "destination": "Lisbon"},
            call_id="c",
            id="tc",
        ),
        tool_result("agent", "search_flights", big, call_id="c", id="tr"),
    ]
    summary = ExtractiveSummarizer(max_sentences=10).summarize(events)
    assert "search_flights(origin=Berlin, destination=Lisbon)" in summary.summary
    assert len(summary.summary) < 600  # a 20 kB payload is not pasted in
    assert summary.source_event_ids == ("u", "tc", "tr")
    assert "Berlin" in summary.entities and "Lisbon" in summary.entities


def test_empty_and_non_content_input() -> None:
    empty = ExtractiveSummarizer().summarize([])
    assert empty == Summary(summary="")
    skipped = [
        Event(
            author="compactor",
            role="system",
            type="compaction",
            text="old summary",
            data={"start_ts": 0.0, "end_ts": 1.0},
            id="k",
        ),
        Event(author="agent", role="system", type="control", data={"action": "x"}, id="ctl"),
        Event(author="agent", role="model", text="partial tok", partial=True, id="p"),
    ]
    assert ExtractiveSummarizer().summarize(skipped) == Summary(summary="")
    only_fillers = ExtractiveSummarizer().summarize([user_message("ok", id="o")])
    assert only_fillers.summary == "" and only_fillers.source_event_ids == ("o",)


def test_source_event_ids_exclude_non_content() -> None:
    events = [
        user_message("I live in Lisbon.", id="a"),
        Event(author="agent", role="system", type="control", data={"x": 1}, id="ctl"),
        model_message("bot", "Lisbon is lovely in spring.", id="b"),
    ]
    assert ExtractiveSummarizer().summarize(events).source_event_ids == ("a", "b")


def test_bad_options_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        ExtractiveSummarizer(max_chars=0)
    with pytest.raises(ValueError, match="redundancy"):
        ExtractiveSummarizer(redundancy=2.0)


def test_registry() -> None:
    assert "extractive" in available_summarizers()
    summarizer = get_summarizer("extractive", max_sentences=3)
    assert isinstance(summarizer, ExtractiveSummarizer) and summarizer.max_sentences == 3
    with pytest.raises(ValueError, match=r"unknown summarizer 'nope'; known: .*extractive"):
        get_summarizer("nope")

    class Echo(Summarizer):
        name = "echo-test"

        def summarize(self, events):  # type: ignore[no-untyped-def]
            return Summary(summary=" ".join(e.text for e in events))

    register_summarizer("echo-test", Echo)
    assert get_summarizer("echo-test").summarize([user_message("hi")]).summary == "hi"


def test_adjectives_only_narrow_a_topic() -> None:
    events = [
        user_message("I'm thinking about getting a pet parrot. My apartment is small.", id="a"),
        model_message("bot", "A small apartment suits a small parrot.", id="b"),
        user_message("Is a small apartment too loud for a parrot?", id="c"),
    ]
    topics = ExtractiveSummarizer().summarize(events).topics
    assert "small apartment" in topics
    assert not {"small", "thinking", "getting"} & set(topics)


# -- the embedding path (real packaged all-MiniLM-L6-v2, loaded once) ---------------
@pytest.fixture(scope="module")
def embedder() -> Embedder:
    loaded = open_embedder("default")
    assert loaded is not None
    return loaded


def bird_chat() -> list[Event]:
    return [
        user_message("I'm thinking about getting a pet parrot.", id="a"),
        model_message("bot", "Cockatiels and budgies are friendly birds for beginners.", id="b"),
        user_message("My car broke down on the highway yesterday.", id="c"),
        model_message(
            "bot", "African Greys are clever talkers but need a lot of attention.", id="d"
        ),
        user_message("Which bird is easiest to keep in a flat?", id="e"),
    ]


def test_embedding_path_is_deterministic(embedder: Embedder) -> None:
    a = ExtractiveSummarizer(embedder=embedder).summarize(parrot_apartment())
    b = ExtractiveSummarizer(embedder=embedder).summarize(list(parrot_apartment()))
    assert a == b and a.summary


def test_summarize_many_matches_one_by_one(embedder: Embedder) -> None:
    summarizer = ExtractiveSummarizer(embedder=embedder)
    batches = [parrot_apartment(), [], bird_chat()]
    assert summarizer.summarize_many(batches) == [summarizer.summarize(b) for b in batches]


def test_embedding_centrality_prefers_what_the_conversation_is_about(embedder: Embedder) -> None:
    summary = ExtractiveSummarizer(embedder=embedder, max_sentences=3).summarize(bird_chat())
    # No word is shared between the bird sentences, yet they are about one thing;
    # the broken-down car is not.
    assert "car broke down" not in summary.summary
    assert "parrot" in summary.summary and "Cockatiels" in summary.summary
    assert all(line.split(": ", 1)[0] in {"User", "bot"} for line in summary.summary.splitlines())
    topics = summary.topics
    assert topics[:2] == ("birds", "parrot")
    assert not {"car", "broke", "highway"} & set(topics)


def test_embedding_mmr_skips_near_duplicates(embedder: Embedder) -> None:
    events = [
        user_message("My parrot Kiwi loves sunflower seeds.", id="a"),
        user_message("My parrot Kiwi loves sunflower seeds!", id="b"),
        user_message("Kiwi, my parrot, loves sunflower seeds.", id="c"),
        user_message("The landlord allows pets in the apartment.", id="d"),
    ]
    summary = ExtractiveSummarizer(embedder=embedder).summarize(events)
    assert summary.summary.count("sunflower") == 1
    assert "landlord" in summary.summary


def test_embedding_path_keeps_the_heuristics(embedder: Embedder) -> None:
    plain = ExtractiveSummarizer().summarize(parrot_apartment())
    dense = ExtractiveSummarizer(embedder=embedder).summarize(parrot_apartment())
    assert dense.key_facts == plain.key_facts
    assert dense.entities == plain.entities
    assert dense.open_threads == plain.open_threads
    assert dense.source_event_ids == plain.source_event_ids
    assert dense.topics[0] == "apartment" and "parrot" in dense.topics[:3]
    assert len(dense.summary) <= 800


def test_registry_resolves_an_embedder_spec(embedder: Embedder) -> None:
    summarizer = get_summarizer("extractive", embedder="default", max_sentences=2)
    assert isinstance(summarizer, ExtractiveSummarizer)
    assert summarizer.embedder is embedder  # loaded once per process
    assert get_summarizer("extractive", embedder="none").embedder is None
    # Pickled (a Ray task) without the model; the worker reloads it by spec.
    clone = pickle.loads(pickle.dumps(summarizer))
    assert clone.embedder is embedder and clone.max_sentences == 2
    assert len(pickle.dumps(summarizer)) < 10_000


def test_bad_embedding_options() -> None:
    with pytest.raises(TypeError, match="embedder"):
        ExtractiveSummarizer(embedder=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mmr_lambda"):
        ExtractiveSummarizer(mmr_lambda=1.5)


def test_month_and_weekday_names_are_not_entities() -> None:
    events = [user_message("On Monday I fly to Lisbon in May, back Friday, March 3.", id="u")]
    entities = ExtractiveSummarizer().summarize(events).entities
    assert "Lisbon" in entities
    assert not {"Monday", "May", "Friday", "March"} & set(entities)
