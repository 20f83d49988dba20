"""The keyword index on Unicode text: words of any script, Snowball stems per language,
Chinese character n-grams; recall in German, French and Chinese through the service."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemoray.memory.recall.bm25 import BM25
from mnemoray.memory.recall.candidates import Candidates
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.recall.keywords import (
    TOKENIZER_VERSION,
    KeywordLanguageError,
    KeywordTokenizer,
)
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers.extractive import ExtractiveSummarizer

AUTO = KeywordTokenizer()


def test_german_words_are_whole_and_stemmed() -> None:
    terms, language = AUTO.analyze("Ich wohne seit Mai in München und lese gern Bücher.")
    assert language == "german"
    assert "munch" in terms and "buch" in terms  # München, Bücher: one word each
    assert "m" not in terms and "nchen" not in terms
    assert "ich" not in terms and "und" not in terms  # German stopwords
    assert AUTO.terms("Die Häuser an der Straße") == ["haus", "strass"]


def test_french_elisions_accents_and_stems() -> None:
    terms, language = AUTO.analyze("J'adore l'hôtel près de la gare et les chevaux.")
    assert language == "french"
    assert terms == ["ador", "hôtel", "pres", "gar", "cheval"]
    assert set(AUTO.terms("les maisons")) == set(AUTO.terms("la maison")) == {"maison"}


def test_chinese_gives_character_unigrams_and_bigrams() -> None:
    terms = AUTO.terms("我住在北京")
    assert {"北", "京", "北京", "住在"} <= set(terms)
    assert "我" not in terms  # too frequent alone; its bigram "我住" stays
    assert "我住" in terms
    mixed = AUTO.terms("Maya fliegt nach 東京")
    assert "東京" in mixed and "maya" in mixed


def test_english_keeps_its_stopwords_and_stems() -> None:
    assert AUTO.analyze("Remind me about my parrots")[0] == ["parrot"]
    assert AUTO.terms("booking booked") == ["book", "book"]


def test_a_short_query_is_stemmed_in_every_language_of_the_documents() -> None:
    index = BM25(["Maya wohnt in München und sammelt alte Bücher", "Maya likes old maps"])
    assert index.languages == {"german", "english"}
    # "Bücher" alone reads as English; its German stem still finds the German text.
    scores = index.scores("Bücher")
    assert scores[0] > 0 and scores[1] == 0
    assert index.scores("München")[0] > 0


def test_language_is_configurable_and_checked() -> None:
    german = KeywordTokenizer("german")
    assert german.terms("Bücher") == ["buch"]
    assert AUTO.terms("Bücher") == ["buch"]  # the letter ü alone says German
    assert KeywordTokenizer("english").terms("Bücher") == ["bücher"]
    with pytest.raises(KeywordLanguageError, match="keyword_language: 'klingon'"):
        KeywordTokenizer("klingon")
    with pytest.raises(ValueError, match="keyword_language"):
        RetrievalConfig(keyword_language="klingon")
    assert RetrievalConfig(keyword_language="french").tokenizer.language == "french"


def test_an_index_is_rebuilt_for_another_tokenizer_never_mixed() -> None:
    cands = Candidates.from_memories(
        [Memory("a", "u", "s", "fact", "Die Bücher liegen auf dem Tisch")], None
    )
    auto = cands.bm25(AUTO)
    assert auto.tokenizer_version == f"{TOKENIZER_VERSION}:auto"
    assert cands.bm25(AUTO) is auto  # cached for the same tokenizer
    english = cands.bm25(KeywordTokenizer("english"))
    assert english is not auto and english.tokenizer_version.endswith(":english")
    assert "bücher" in english.vocab and "buch" in auto.vocab


@pytest.fixture
def service(tmp_path: Path) -> MemoryService:
    """A keyword-only store written with the records' raw texts (the keyword index is
    built from them when the store is read, so a store written by an older version
    is searched with the current tokenizer)."""
    svc = MemoryService(MemoryStore(tmp_path / "store"), None, ExtractiveSummarizer())
    svc.add_memories(
        [
            Memory(
                "app",
                "lena",
                "de",
                "fact",
                "Lena ist nach München gezogen und wohnt jetzt in der Leopoldstraße",
            ),
            Memory("app", "lena", "de2", "fact", "Lena sammelt alte Bücher über Vögel"),
            Memory(
                "app",
                "lena",
                "fr",
                "fact",
                "Lena adore les chevaux et monte à cheval chaque dimanche",
            ),
            Memory("app", "lena", "fr2", "fact", "L'appartement de Lena est près de la gare"),
            Memory("app", "lena", "zh", "fact", "丽娜住在北京，喜欢吃饺子"),
            Memory("app", "lena", "zh2", "fact", "丽娜的妹妹在上海工作"),
            Memory("app", "lena", "en", "fact", "Lena's parrot is called Kiwi"),
        ]
    )
    return svc


@pytest.mark.parametrize(
    ("query", "session"),
    [
        ("Wo wohnt Lena? In München?", "de"),
        ("welches Buch", "de2"),
        ("Vogel", "de2"),
        ("Lena et son cheval", "fr"),
        ("l'appartement près de la gare", "fr2"),
        ("北京", "zh"),
        ("她喜欢吃什么饺子", "zh"),
        ("上海", "zh2"),
        ("parrots", "en"),
    ],
)
def test_keyword_recall_in_german_french_and_chinese(
    service: MemoryService, query: str, session: str
) -> None:
    results = service.search("app", "lena", query, top_k=3, mode="keyword")
    assert results, query
    assert results[0].memory.session_id == session, [r.memory.text for r in results]
    assert results[0].signals["bm25"] > 0


def test_the_language_is_a_recall_setting_per_app() -> None:
    from mnemoray.settings.base import recall_settings

    s = recall_settings(
        {"keyword_language": "german", "apps": {"paris_app": {"keyword_language": "french"}}}
    )
    assert s.default.tokenizer.language == "german"
    assert s.retrieval_for("paris_app").tokenizer.language == "french"
    with pytest.raises(ValueError, match="keyword_language"):
        recall_settings({"keyword_language": "klingon"})


@pytest.mark.parametrize("word", ["door", "hat", "van", "die", "war"])
def test_an_english_word_that_is_a_function_word_elsewhere_still_finds_english_text(
    word: str,
) -> None:
    docs = [
        f"The {word} in the hallway was painted green last week.",
        "We cooked pasta with garlic and basil for dinner.",
    ]
    index = BM25(docs)
    assert index.languages == {"english"}
    scores = index.scores(word)
    assert scores[0] > 0 and scores[1] == 0


def test_a_query_in_the_documents_language_drops_that_languages_stopwords() -> None:
    index = BM25(["Ich wohne in München und lese gern Bücher.", "I read books in Munich."])
    assert "und" not in AUTO.query_terms("und Bücher", index.languages)
    # Searched only in English documents, the English list decides.
    assert AUTO.query_terms("the door", {"english"}) == {"door"}
