"""A deterministic extractive summarizer: no randomness, no weights required.

The summary is the most central sentences of the conversation, kept in their
original order under a length budget. Centrality and redundancy come from
TF-IDF by default; given an :class:`~mnemoray.embedders.Embedder` they come
from sentence embeddings instead (mean cosine to the other sentences, then
MMR selection), which also breaks ties between equally frequent topics by
their closeness to the whole conversation. Topics, user facts, entities and
open threads come from small, explainable heuristics, each traceable to
source events.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mnemoray.errors import InvalidInput
from mnemoray.sessions.events import Event
from mnemoray.summarizers.base import Fact, Summarizer, Summary
from mnemoray.summarizers.outcomes import outcomes
from mnemoray.temporal import CALENDAR_WORDS
from mnemoray.text import STOPWORDS, split_sentences, stem, terms, words

if TYPE_CHECKING:
    from mnemoray.embedders import Embedder

# Never summarized as content: they are bookkeeping, not conversation.
_SKIPPED_TYPES = frozenset({"compaction", "control"})

# Summary weights: what users say about themselves is what an agent must not
# lose; replies often restate the user, so they weigh a little less.
_FACT_WEIGHT = 1.5
_REPLY_WEIGHT = 0.8

# Words that are frequent in chat but never what a conversation is "about".
_TOPIC_FILLERS = frozenset(
    {
        "hi",
        "hello",
        "hey",
        "yeah",
        "yep",
        "nope",
        "great",
        "good",
        "nice",
        "cool",
        "fine",
        "lot",
        "lots",
        "thing",
        "things",
        "something",
        "anything",
        "everything",
        "nothing",
        "maybe",
        "actually",
        "one",
        "two",
        "going",
        "go",
        "make",
        "made",
        "need",
        "needs",
        "help",
        "let",
        "see",
        "look",
        "much",
        "many",
        "able",
        "sounds",
        "sound",
        "right",
        "way",
        "kind",
        "sort",
        "bit",
        "pretty",
        "quite",
        "still",
        "even",
        "back",
        "lovely",
        "glad",
        "happy",
        "sorry",
        "course",
        "perfect",
        "awesome",
        "absolutely",
        "definitely",
        "probably",
        "usually",
        "always",
        "never",
        "today",
        "tomorrow",
        "yesterday",
        "called",
        "returned",
        "error",
        "may",
        "might",
        "must",
        "shall",
        "eur",
        "euro",
        "euros",
        "usd",
        "dollar",
        "dollars",
        "gbp",
        "near",
        "thinking",
        "getting",
        "looking",
        "trying",
        "wondering",
        "talking",
        "saying",
        "doing",
        "having",
        "taking",
        "coming",
        "giving",
        "keeping",
        "considering",
        "consider",
        "though",
        "instead",
        "else",
        "etc",
    }
)

# Adjectives that narrow a phrase ("small apartment") but are no topic alone.
_MODIFIERS = frozenset(
    {
        "small",
        "big",
        "large",
        "little",
        "new",
        "old",
        "long",
        "short",
        "high",
        "low",
        "best",
        "better",
        "first",
        "last",
        "next",
        "early",
        "late",
        "cheap",
        "expensive",
        "quiet",
        "loud",
        "busy",
        "close",
        "different",
        "same",
        "other",
        "main",
        "whole",
    }
)

# Leading words that make a capitalised run look like a name but are not one.
_NOT_NAME_WORDS = frozenset(
    {
        "hi",
        "hello",
        "hey",
        "dear",
        "thanks",
        "thank",
        "please",
        "yes",
        "no",
        "ok",
        "okay",
        "oh",
        "well",
        "so",
        "also",
        "and",
        "but",
        "great",
        "sure",
    }
)

_DISCLOSING_VERBS = (
    r"am|live|lived|have|had|own|like|prefer|love|hate|dislike|enjoy|want|plan|work|worked|"
    r"study|studied|moved|grew\s+up|was\s+born|speak|use|need|eat|drink|drive|play|go|got|"
    r"started|stopped|bought|can't|cannot|don't|do\s+not|will|won't|was|wasn't"
)
# What happened to the user: a verb in the past ("I finished reading ...", "I found out
# I'm allergic ...", "I signed up for ..."); "-ed" words that are not events are left out.
_PAST_EVENTS = (
    r"(?!(?:need|want|wonder|guess|hope|mean|feel|seem)ed\b)[a-z]{2,}ed|found|made|took|saw|met|"
    r"went|began|became|left|sold|won|lost|broke|ran|wrote|read|got|gave|built|fell|"
    r"heard|kept|paid|sent|spent|told|taught|caught|brought|quit"
)
# "My <something> <verb>": what the user's people, pets and things are or do.
_POSSESSION_VERBS = (
    r"is|are|was|were|has|have|had|needs?|loves?|likes?|hates?|lives?|works?|eats?|prefers?|"
    r"gets?|doesn't|don't|can't|cannot|will"
)
# Self-disclosure openers, matched at the start of a sentence (after fillers).
_FIRST_PERSON = re.compile(
    rf"(?:(?:(?:my\s+)?[\w'-]+\s+and\s+)?i\s+(?:(?:just|recently|finally|also|really|usually|"
    rf"always|never|still|currently|now|"
    rf"often|mostly)\s+)?(?:{_DISCLOSING_VERBS}|{_PAST_EVENTS})|i'm|im|i've|i'll|i'd\s+(?:like|love|prefer|rather)|"
    rf"i\s+would\s+(?:like|love|prefer|rather)|(?:my|our)\s+(?!question)[\w' -]{{1,40}}?\s+"
    rf"(?:{_POSSESSION_VERBS})|my\s+name|call\s+me|we\s+(?:live|have|are|own|moved)|we're)\b",
    re.IGNORECASE,
)
_LEADING_FILLER = re.compile(
    r"^(?:(?:oh|well|also|and|but|so|btw|by\s+the\s+way|actually|anyway|hi|hey|hello|yes|"
    r"yeah|no|ok|okay|thanks|thank\s+you|fyi|just\s+so\s+you\s+know)\b[,!.:;\s-]*)+",
    re.IGNORECASE,
)
# A few words before a colon that lead into a statement ("Big news: I ..."); not a
# comma, whose clause may carry the meaning ("If I get the job, I'll move").
_LEAD_IN = re.compile(r"^[^:,.!?\n]{1,30}:\s+")
# First-person openers that ask or hedge rather than disclose.
_NOT_A_FACT = re.compile(
    r"^(?:i'm\s+(?:not\s+sure|wondering|curious|just\s+curious|looking\s+for\s+help)|"
    r"i\s+was\s+wondering|(?:i\s+(?:want|need|would\s+like)|i'd\s+like)\s+to\s+(?:know|ask)|"
    r"i\s+need\s+help|i\s+think\s+so|i\s+don't\s+know|i\s+do\s+not\s+know)\b",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(
    r"^(?:what|when|where|which|who|whom|whose|why|how|can\s+you|could\s+you|would\s+you|"
    r"will\s+you|do\s+you|does|did|is\s+there|are\s+there|should\s+i|shall\s+i|can\s+i)\b",
    re.IGNORECASE,
)

_NAME_WORD = r"[A-Z][A-Za-z0-9'\-]*"
_NAME_RUN = re.compile(
    rf"(?<![\w'\-]){_NAME_WORD}(?:\s+(?:(?:of|de|da|das|do|dos|del|della|der|di|du|des|van|von|la|le|al|bin)\s+)?{_NAME_WORD})*"
)
_UNITS = (
    r"%|percent|kg|g|mg|lbs?|pounds|km|cm|mm|m|mi|miles?|ft|feet|inch(?:es)?|°\s?[CF]|C|F|ml|"
    r"l|liters?|litres?|gb|mb|tb|kb|ghz|mhz|hz|kwh|kw|w|v|h|hrs?|hours?|min|mins|minutes?|"
    r"s|secs?|seconds?|days?|nights?|weeks?|months?|years?|yo|eur|euros?|usd|dollars?|gbp|"
    r"k|bn|million|billion|people|persons?|guests?|rooms?|bedrooms?|sq\s?m|m2|m²"
)
_QUANTITY = re.compile(
    rf"[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|m|bn|million|billion))?\b"
    rf"|\b\d[\d,]*(?:\.\d+)?(?:\s?-\s?\d[\d,]*(?:\.\d+)?)?\s?(?:{_UNITS})(?![\w])",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Sentence:
    position: int  # order in the conversation
    event: Event
    label: str  # who said it, as shown in the summary
    text: str
    weight: float  # tool renderings matter less than what people said
    is_message: bool


def brief(value: Any, limit: int) -> str:
    """``value`` (text or JSON) in at most ``limit`` characters."""
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    )
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def render_tool_call(event: Event) -> str:
    """``name(arg=value, ...)`` of a ``tool_call`` event, briefly."""
    args = event.data.get("args") or {}
    rendered = (
        ", ".join(f"{k}={brief(v, 40)}" for k, v in args.items())
        if isinstance(args, dict)
        else brief(args, 80)
    )
    return f"{event.data['name']}({brief(rendered, 120)})"


def _clean(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").strip()


class ExtractiveSummarizer(Summarizer):
    """Central, non-redundant sentences; heuristics for the rest.

    ``max_sentences``/``max_chars`` bound the summary, ``redundancy`` (0..1)
    is how strongly a sentence similar to one already chosen is penalised,
    ``tool_weight`` scales the score of rendered tool calls and results.

    ``embedder`` (an :class:`~mnemoray.embedders.Embedder`, or a spec string
    for :func:`~mnemoray.embedders.open_embedder` such as ``"default"``)
    switches salience to embedding centrality (mean cosine of a sentence to
    all the others) and selection to MMR with ``mmr_lambda`` (relevance vs.
    similarity to what is already chosen). Without one, sparse TF-IDF is used.
    Both paths are deterministic.
    """

    name = "extractive"

    def __init__(
        self,
        *,
        max_sentences: int = 6,
        max_chars: int = 800,
        max_topics: int = 8,
        max_entities: int = 20,
        redundancy: float = 0.5,
        tool_weight: float = 0.5,
        max_sentence_chars: int = 300,
        embedder: Embedder | str | None = None,
        mmr_lambda: float = 0.7,
    ) -> None:
        for option, value in (
            ("max_sentences", max_sentences),
            ("max_chars", max_chars),
            ("max_topics", max_topics),
            ("max_entities", max_entities),
            ("max_sentence_chars", max_sentence_chars),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInput(f"must be a positive int, got {value!r}", field=option)
        for option, fraction in (
            ("redundancy", redundancy),
            ("tool_weight", tool_weight),
            ("mmr_lambda", mmr_lambda),
        ):
            if (
                isinstance(fraction, bool)
                or not isinstance(fraction, (int, float))
                or not 0.0 <= fraction <= 1.0
            ):
                raise InvalidInput(f"must be a number in [0, 1], got {fraction!r}", field=option)
        self.max_sentences = max_sentences
        self.max_chars = max_chars
        self.max_topics = max_topics
        self.max_entities = max_entities
        self.redundancy = float(redundancy)
        self.tool_weight = float(tool_weight)
        self.max_sentence_chars = max_sentence_chars
        self.mmr_lambda = float(mmr_lambda)
        # A spec string is kept so a pickled summarizer (a Ray task) reloads
        # the model once per worker process instead of shipping it.
        self._embedder_spec: str | None = None
        if isinstance(embedder, str):
            from mnemoray.embedders import open_embedder

            self._embedder_spec = embedder
            embedder = open_embedder(embedder)  # "none"/"keyword" -> None: TF-IDF
        if embedder is not None and not callable(getattr(embedder, "encode", None)):
            raise TypeError(
                f"embedder: expected an Embedder, a spec string or None, "
                f"got {type(embedder).__name__}"
            )
        self.embedder: Embedder | None = embedder

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._embedder_spec is not None:
            state["embedder"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._embedder_spec is not None:
            from mnemoray.embedders import open_embedder

            self.embedder = open_embedder(self._embedder_spec)

    # -- entry point ---------------------------------------------------------
    def summarize(self, events: Sequence[Event]) -> Summary:
        return self.summarize_many([events])[0]

    def summarize_many(self, batches: Sequence[Sequence[Event]]) -> list[Summary]:
        """One embedding call for every sentence of every batch (Ray Data batches)."""
        contents = [
            [e for e in events if not e.partial and e.type not in _SKIPPED_TYPES]
            for events in batches
        ]
        units = [self._sentences(content) for content in contents]
        embedded = self._embed([self._clip(s.text) for sentences in units for s in sentences])
        out: list[Summary] = []
        offset = 0
        for content, sentences in zip(contents, units, strict=True):
            embeddings = None
            if embedded is not None and sentences:
                embeddings = embedded[offset : offset + len(sentences)]
            offset += len(sentences)
            decisions, commitments = outcomes(content)
            out.append(
                Summary(
                    summary=self._extract(sentences, embeddings),
                    topics=self._topics(sentences, embeddings),
                    key_facts=self._facts(content),
                    entities=self._entities(sentences),
                    open_threads=self._open_threads(content),
                    source_event_ids=tuple(e.id for e in content),
                    decisions=decisions,
                    commitments=commitments,
                )
            )
        return out

    def _embed(self, texts: list[str]) -> np.ndarray | None:
        """Unit-norm rows, or None on the TF-IDF path (no embedder, no text)."""
        if self.embedder is None or not texts:
            return None
        return np.asarray(self.embedder.encode(texts), dtype=np.float32)

    # -- units ---------------------------------------------------------------
    def _sentences(self, events: Sequence[Event]) -> list[_Sentence]:
        out: list[_Sentence] = []

        def add(event: Event, label: str, text: str, weight: float, is_message: bool) -> None:
            text = _clean(text)
            if text:
                out.append(_Sentence(len(out), event, label, text, weight, is_message))

        for e in events:
            label = "User" if e.role == "user" else e.author
            if e.type == "message":
                for sentence in split_sentences(_clean(e.text)):
                    if e.role != "user":
                        weight = _REPLY_WEIGHT
                    else:
                        weight = _FACT_WEIGHT if _statement(sentence) is not None else 1.0
                    add(e, label, sentence, weight, True)
            elif e.type == "tool_call":
                add(e, label, f"Called {render_tool_call(e)}.", self.tool_weight, False)
            elif e.type == "tool_result":
                response = brief(e.data.get("response"), 160)
                add(e, label, f"{e.data['name']} returned {response}", self.tool_weight, False)
            elif e.type == "error":
                detail = e.text or brief(e.data, 160)
                add(e, label, f"Error: {detail}", 1.0, False)
        return out

    # -- summary: central, non-redundant sentences ---------------------------
    def _extract(self, sentences: list[_Sentence], embeddings: np.ndarray | None = None) -> str:
        # Numbers are left out of similarity: template sentences that differ
        # only in a price or date are redundant, not distinct.
        vectors = _tfidf([[t for t in terms(s.text) if not t.isdigit()] for s in sentences])
        n = len(sentences)
        # One-word sentences ("Great.") rarely carry content; keep them only
        # when nothing longer exists.
        pool = [i for i, v in enumerate(vectors) if len(v) >= 2] or [
            i for i, v in enumerate(vectors) if v
        ]
        if embeddings is None:
            centroid: dict[str, float] = {}
            for vec in vectors:
                for term, w in vec.items():
                    centroid[term] = centroid.get(term, 0.0) + w
            # Mean similarity to every other sentence: how central it is.
            central = {
                i: (_dot(vectors[i], centroid) - 1.0) / (n - 1) if n > 1 else 0.0 for i in pool
            }
            trade, duplicate = self.redundancy, 0.9

            def similarity_to(best: int, among: list[int]) -> list[float]:
                return [_dot(vectors[i], vectors[best]) for i in among]
        else:
            # Mean cosine to the others without an n x n matrix: e_i . sum(e) - 1.
            sums = embeddings @ embeddings.sum(axis=0)
            central = {i: (float(sums[i]) - 1.0) / (n - 1) if n > 1 else 0.0 for i in pool}
            trade, duplicate = 1.0 - self.mmr_lambda, 0.95

            def similarity_to(best: int, among: list[int]) -> list[float]:
                return [float(x) for x in embeddings[among] @ embeddings[best]]

        raw: dict[int, float] = {}
        for i in pool:
            # A small prior for content-bearing sentences breaks ties among
            # unrelated sentences (a short or disjoint conversation).
            raw[i] = sentences[i].weight * (central[i] + 0.02 * min(len(vectors[i]), 10) / 10)
        top = max(raw.values(), default=0.0) or 1.0
        # Relevance on the same 0..1 scale as the similarity it is traded against.
        relevance = {i: max(score, 0.0) / top for i, score in raw.items()}

        chosen: list[int] = []
        used = 0
        # Max similarity of each candidate to anything chosen, updated per pick
        # so selection stays linear in the number of sentences.
        overlap = dict.fromkeys(relevance, 0.0)
        while overlap and len(chosen) < self.max_sentences and self.max_chars - used >= 20:
            best = max(
                overlap, key=lambda i: ((1.0 - trade) * relevance[i] - trade * overlap[i], -i)
            )
            if overlap.pop(best) > duplicate:
                continue  # a near-duplicate adds length, not information
            cost = len(self._clip(sentences[best].text)) + len(sentences[best].label) + 2
            if chosen and used + cost > self.max_chars:
                continue  # a shorter sentence may still fit
            chosen.append(best)
            used += cost
            rest = list(overlap)
            for i, sim in zip(rest, similarity_to(best, rest), strict=True):
                overlap[i] = max(overlap[i], sim)

        lines: list[str] = []
        last_event: str | None = None
        for i in sorted(chosen):
            s = sentences[i]
            text = self._clip(s.text)
            if s.event.id == last_event:
                lines[-1] += " " + text
            else:
                lines.append(f"{s.label}: {text}")
            last_event = s.event.id
        summary = "\n".join(lines)
        return summary if len(summary) <= self.max_chars else summary[: self.max_chars - 1] + "…"

    def _clip(self, text: str) -> str:
        limit = self.max_sentence_chars
        return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"

    # -- topics: frequent keyphrases -----------------------------------------
    def _topics(
        self, sentences: list[_Sentence], embeddings: np.ndarray | None = None
    ) -> tuple[str, ...]:
        counts, first_seen, surfaces, where = _phrases(sentences)

        def score(key: tuple[str, ...]) -> float:
            # A phrase said more than once is a stronger signal than its words.
            return counts[key] * (1.0 + 0.5 * (len(key) - 1))

        ranked = sorted(
            (k for k in counts if len(k) == 1 or counts[k] >= 2),
            key=lambda k: (-score(k), first_seen[k]),
        )
        if embeddings is not None and ranked:
            ranked = self._rerank_topics(ranked, score, surfaces, where, sentences, embeddings)
        picked: list[tuple[str, ...]] = []
        for key in ranked:
            if len(picked) == self.max_topics:
                break
            if any(_contains(p, key) for p in picked):
                continue  # "flores" adds nothing next to "rua das flores"
            picked.append(key)
        return tuple(_most_common(surfaces[k]) for k in picked)

    def _rerank_topics(
        self,
        ranked: list[tuple[str, ...]],
        score: Any,
        surfaces: dict[tuple[str, ...], Counter[str]],
        where: dict[tuple[str, ...], list[int]],
        sentences: list[_Sentence],
        embeddings: np.ndarray,
    ) -> list[tuple[str, ...]]:
        """Break frequency ties by how central a phrase is to the conversation:
        the cosine of the phrase to the centroid of the messages plus the
        centrality of the most central sentence that says it.

        Only the head of the ranking is embedded (what can still be picked),
        so a long session costs a bounded number of short encodes.
        """
        rows = [i for i, s in enumerate(sentences) if s.is_message]
        if not rows:
            return ranked
        head = ranked[: max(16, 3 * self.max_topics)]
        messages = embeddings[rows]
        centroid = messages.mean(axis=0)
        norm = float(np.linalg.norm(centroid))
        if norm == 0.0:
            return ranked
        n = len(rows)
        central = dict(
            zip(
                rows,
                ((messages @ messages.sum(axis=0) - 1.0) / max(n - 1, 1)).tolist(),
                strict=True,
            )
        )
        phrases = self._embed([_most_common(surfaces[k]) for k in head])
        assert phrases is not None
        closeness = {
            k: round(float(v) + max(central[i] for i in where[k]), 6)
            for k, v in zip(head, phrases @ (centroid / norm), strict=True)
        }
        order = {k: i for i, k in enumerate(head)}
        return (
            sorted(head, key=lambda k: (-score(k), -closeness[k], order[k])) + ranked[len(head) :]
        )

    # -- key facts: what the user said about themselves ---------------------
    def _facts(self, events: Sequence[Event]) -> tuple[Fact, ...]:
        facts: dict[str, tuple[str, list[str]]] = {}
        for e in events:
            if e.role != "user" or e.type != "message":
                continue
            for sentence in split_sentences(_clean(e.text)):
                if (stated := _statement(sentence)) is None:
                    continue
                key = " ".join(words(_LEADING_FILLER.sub("", stated)))
                text, ids = facts.setdefault(key, (stated, []))
                if e.id not in ids:
                    ids.append(e.id)
        return tuple(Fact(text, tuple(ids)) for text, ids in facts.values())

    # -- entities: capitalised names and quantities --------------------------
    def _entities(self, sentences: list[_Sentence]) -> tuple[str, ...]:
        found: list[tuple[int, int, str, bool]] = []  # (sentence, offset, text, initial)
        for s in sentences:
            lead = len(s.text) - len(s.text.lstrip("-*•>\"'([ \t"))
            quantities = list(_QUANTITY.finditer(s.text))
            for m in quantities:
                found.append((s.position, m.start(), m.group(0).strip(), False))
            for m in _NAME_RUN.finditer(s.text):
                if any(q.start() < m.end() and m.start() < q.end() for q in quantities):
                    continue  # the unit of "120 EUR" is not a name
                parts = m.group(0).split()
                dropped = 0
                while parts and (
                    parts[0].lower() in STOPWORDS or parts[0].lower() in _NOT_NAME_WORDS
                ):
                    parts.pop(0)
                    dropped += 1
                while parts and (
                    parts[-1].lower() in STOPWORDS or parts[-1].lower() in CALENDAR_WORDS
                ):
                    parts.pop()
                while parts and parts[0].lower() in CALENDAR_WORDS:  # "Monday" is a date
                    parts.pop(0)
                    dropped += 1
                if parts:
                    name = re.sub(r"'s$", "", " ".join(parts))
                    found.append((s.position, m.start(), name, m.start() == lead and not dropped))
        # Sentence starts are capitalised anyway: an initial run counts only as
        # far as it is also seen mid-sentence, else its first word is dropped
        # ("Booked TAP" -> "TAP", "Thanks" -> nothing).
        mid = {name for _, _, name, initial in found if not initial}
        out: dict[str, str] = {}
        for _, _, name, initial in sorted(found, key=lambda f: (f[0], f[1])):
            if initial and name not in mid:
                name = name.partition(" ")[2]
            if name:
                out.setdefault(name.lower(), name)
            if len(out) == self.max_entities:
                break
        return tuple(out.values())

    # -- open threads: unanswered questions, unanswered tool calls ----------
    def _open_threads(self, events: Sequence[Event]) -> tuple[str, ...]:
        last_reply = max(
            (
                i
                for i, e in enumerate(events)
                if e.role == "model" and e.type == "message" and e.text.strip()
            ),
            default=-1,
        )
        answered = {e.call_id for e in events if e.type == "tool_result"}
        threads: dict[str, None] = {}
        for i, e in enumerate(events):
            if e.type == "message" and e.role == "user" and i > last_reply:
                for sentence in split_sentences(_clean(e.text)):
                    body = _LEADING_FILLER.sub("", sentence)
                    if sentence.endswith("?") or _QUESTION_START.match(body):
                        threads.setdefault(f"Unanswered question: {sentence}", None)
            elif e.type == "tool_call" and e.call_id not in answered:
                threads.setdefault(f"Pending tool call: {render_tool_call(e)}", None)
        return tuple(threads)


def _statement(sentence: str) -> str | None:
    """The first-person statement about the user that ``sentence`` makes (not a
    question, not a hedge), from its opening words on: one that names something
    beside them ("I moved to Berlin", not "I love it"), after a short lead-in too
    ("Big news: I moved ..." states "I moved ..."); None if it makes none."""
    if sentence.endswith("?"):
        return None
    body = _LEADING_FILLER.sub("", sentence)
    opener = _FIRST_PERSON.match(body)
    if opener is None and (lead := _LEAD_IN.match(body)) is not None:
        body = _LEADING_FILLER.sub("", body[lead.end() :])
        opener = _FIRST_PERSON.match(body)
    if opener is None or _NOT_A_FACT.match(body) or not terms(body[opener.end() :]):
        return None
    return sentence if body == _LEADING_FILLER.sub("", sentence) else body


Phrase = tuple[str, ...]  # stemmed words


def _phrases(
    sentences: list[_Sentence],
) -> tuple[Counter[Phrase], dict[Phrase, int], dict[Phrase, Counter[str]], dict[Phrase, list[int]]]:
    """Every phrase of 1-3 topic words in the messages: (how often, order first seen,
    how often each surface form, the sentences it occurs in). A phrase may start with a
    modifier but not end with one: "small" alone or "new small" is no topic, yet "small
    flat" is."""
    counts: Counter[Phrase] = Counter()
    first_seen: dict[Phrase, int] = {}
    surfaces: dict[Phrase, Counter[str]] = {}
    where: dict[Phrase, list[int]] = {}  # sentences a phrase occurs in
    for s in sentences:
        if not s.is_message:
            continue
        keep = [w if w in _MODIFIERS or _is_topic_word(w) else None for w in words(s.text)]
        stems = [stem(w) if w is not None else None for w in keep]
        n = len(keep)
        for j in range(n):
            for end in range(j + 1, min(j + 3, n) + 1):
                last = keep[end - 1]
                if last is None:
                    break  # every longer phrase from j holds it too
                if last in _MODIFIERS:
                    continue
                key: Phrase = tuple(stems[j:end])  # type: ignore[arg-type]
                surface = " ".join(keep[j:end])  # type: ignore[arg-type]
                if key in first_seen:
                    surfaces[key][surface] += 1
                    where[key].append(s.position)
                else:
                    first_seen[key] = len(first_seen)
                    surfaces[key] = Counter((surface,))
                    where[key] = [s.position]
                counts[key] += 1
    return counts, first_seen, surfaces, where


def _is_topic_word(word: str) -> bool:
    return (
        len(word) >= 3
        and not word.isdigit()
        and "'" not in word
        and word not in STOPWORDS
        and word not in _TOPIC_FILLERS
    )


def _contains(phrase: tuple[str, ...], part: tuple[str, ...]) -> bool:
    n = len(part)
    return any(phrase[i : i + n] == part for i in range(len(phrase) - n + 1))


def _most_common(counter: Counter[str]) -> str:
    # Counter.most_common keeps insertion order among ties: deterministic.
    return counter.most_common(1)[0][0]


def _tfidf(docs: list[list[str]]) -> list[dict[str, float]]:
    """L2-normalised sublinear TF-IDF vectors, one sparse dict per document."""
    df: Counter[str] = Counter()
    for doc in docs:
        df.update(set(doc))
    n = len(docs)
    vectors: list[dict[str, float]] = []
    for doc in docs:
        tf = Counter(doc)
        vec = {
            t: (1.0 + math.log(c)) * (math.log((1 + n) / (1 + df[t])) + 1.0) for t, c in tf.items()
        }
        norm = math.sqrt(sum(w * w for w in vec.values()))
        vectors.append({t: w / norm for t, w in vec.items()} if norm else {})
    return vectors


def _dot(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(w * b.get(t, 0.0) for t, w in a.items())
