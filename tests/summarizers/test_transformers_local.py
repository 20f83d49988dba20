"""TransformersSummarizer against real tiny models built and saved in the test."""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import (  # noqa: E402
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
)

from mnemoray.sessions.events import Event, model_message, user_message  # noqa: E402
from mnemoray.summarizers.base import Summarizer, Summary  # noqa: E402
from mnemoray.summarizers.errors import PromptTooLongError, SummaryParseError  # noqa: E402
from mnemoray.summarizers.transformers_local import TransformersSummarizer  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|> {{ m.content }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# What the hand-wired model emits; every whitespace token is distinct so that
# "next token = f(current token)" spells it out exactly.
CANNED = json.dumps(
    {
        "summary": "User adopted a parrot named Kiwi and wants vet advice.",
        "topics": ["parrots", "pet care"],
        "key_facts": [{"text": "Owns an African Grey called Kiwi", "events": [0]}],
        "entities": ["Kiwi"],
        "open_threads": [],
    }
)
PLAIN_WORDS = ["the", "user", "has", "a", "parrot", "named", "kiwi", "and", "asks", "about", "food"]


def _tokenizer(words: list[str], chat_template: str | None = None) -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(SPECIALS + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # re-joins words with single spaces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        bos_token="[BOS]",
        eos_token="[EOS]",
    )
    if chat_template:
        fast.chat_template = chat_template
    return fast


def _save(model, tokenizer, path: Path) -> str:
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def wired_causal(tmp_path_factory) -> str:
    """A 1-layer GPT-2 whose weights make greedy decoding emit CANNED, then EOS.

    Blocks and positions are zeroed, so the hidden state is the one-hot
    embedding of the current token; the untied LM head maps each token to its
    successor in the chain "<|assistant|>" -> CANNED words -> "[EOS]".
    """
    words = CANNED.split()
    assert len(set(words)) == len(words)
    tokenizer = _tokenizer(words, CHAT_TEMPLATE)
    vocab = tokenizer.get_vocab()
    size = len(vocab)
    config = GPT2Config(
        vocab_size=size,
        n_positions=1024,
        n_embd=size,
        n_layer=1,
        n_head=1,
        tie_word_embeddings=False,
        bos_token_id=vocab["[BOS]"],
        eos_token_id=vocab["[EOS]"],
        pad_token_id=vocab["[PAD]"],
    )
    model = GPT2LMHeadModel(config)
    chain = ["<|assistant|>", *words, "[EOS]"]
    with torch.no_grad():
        for param in model.transformer.h.parameters():
            param.zero_()
        model.transformer.wpe.weight.zero_()
        model.transformer.wte.weight.copy_(torch.eye(size))
        head = torch.zeros(size, size)
        for current, nxt in pairwise(chain):
            head[vocab[nxt], vocab[current]] = 10.0
        model.lm_head.weight.copy_(head)
    return _save(model, tokenizer, tmp_path_factory.mktemp("wired"))


@pytest.fixture(scope="module")
def random_causal(tmp_path_factory) -> str:
    torch.manual_seed(0)
    tokenizer = _tokenizer(PLAIN_WORDS)
    vocab = tokenizer.get_vocab()
    config = GPT2Config(
        vocab_size=len(vocab),
        n_positions=512,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=vocab["[BOS]"],
        eos_token_id=vocab["[EOS]"],
        pad_token_id=vocab["[PAD]"],
    )
    return _save(GPT2LMHeadModel(config), tokenizer, tmp_path_factory.mktemp("random_gpt2"))


@pytest.fixture(scope="module")
def random_seq2seq(tmp_path_factory) -> str:
    torch.manual_seed(0)
    tokenizer = _tokenizer(PLAIN_WORDS)
    vocab = tokenizer.get_vocab()
    config = T5Config(
        vocab_size=len(vocab),
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        pad_token_id=vocab["[PAD]"],
        eos_token_id=vocab["[EOS]"],
        decoder_start_token_id=vocab["[PAD]"],
    )
    return _save(T5ForConditionalGeneration(config), tokenizer, tmp_path_factory.mktemp("t5"))


class FixedSummarizer(Summarizer):
    """A real (trivial) Summarizer to stand in as the fallback."""

    name = "fixed"

    def summarize(self, events: Sequence[Event]) -> Summary:
        return Summary(summary="fallback summary", source_event_ids=tuple(e.id for e in events))


def _window(text: str = "I just adopted an African Grey parrot, her name is Kiwi.") -> list[Event]:
    return [
        user_message(text, timestamp=1_700_000_000),
        model_message(
            "vet_bot", "Congratulations! Ask me anything about Kiwi.", timestamp=1_700_000_060
        ),
        Event(author="system", role="system", type="control", timestamp=1_700_000_061),
    ]


def test_wired_model_end_to_end_with_chat_template(wired_causal):
    summarizer = TransformersSummarizer(wired_causal, max_new_tokens=64)
    assert summarizer.kind == "causal"
    events = _window()

    prompt = summarizer.render_input(events)
    assert prompt.startswith("<|user|> ") and prompt.endswith("<|assistant|>")
    assert "[e0] user (2023-11-14 22:13): I just adopted" in prompt

    summary = summarizer.summarize(events)
    assert summary.summary == "User adopted a parrot named Kiwi and wants vet advice."
    assert summary.topics == ("parrots", "pet care")
    assert summary.entities == ("Kiwi",)
    assert [(f.text, f.source_event_ids) for f in summary.key_facts] == [
        ("Owns an African Grey called Kiwi", (events[0].id,))
    ]
    # The control event was never shown to the model, so it is not a source.
    assert summary.source_event_ids == (events[0].id, events[1].id)


def test_summarize_many_batches_windows_of_different_lengths(wired_causal):
    summarizer = TransformersSummarizer(wired_causal, max_new_tokens=64, batch_size=2)
    short, long = _window("Kiwi."), _window("My parrot Kiwi " * 20)
    third = _window("Another window")
    summaries = summarizer.summarize_many([short, long, third])
    assert [s.key_facts[0].source_event_ids for s in summaries] == [
        (short[0].id,),
        (long[0].id,),
        (third[0].id,),
    ]
    assert summarizer.summarize_many([]) == []


def test_truncated_generation_names_the_limit(wired_causal):
    summarizer = TransformersSummarizer(wired_causal, max_new_tokens=5)
    with pytest.raises(SummaryParseError, match=r"max_new_tokens=5"):
        summarizer.summarize(_window())


def test_random_causal_output_is_rejected_or_falls_back(random_causal):
    summarizer = TransformersSummarizer(random_causal, max_new_tokens=12)
    # The vocabulary has no "{", so no output of this model can hold JSON.
    assert not any("{" in token for token in summarizer.tokenizer.get_vocab())
    with pytest.raises(SummaryParseError, match=r"^transformers: no summary JSON object"):
        summarizer.summarize(_window())

    events = _window()
    with_fallback = TransformersSummarizer(
        random_causal, max_new_tokens=12, fallback=FixedSummarizer()
    )
    assert with_fallback.summarize(events) == Summary(
        "fallback summary", source_event_ids=tuple(e.id for e in events)
    )


def test_random_seq2seq_auto_detected_and_batched_with_fallback(random_seq2seq):
    summarizer = TransformersSummarizer(
        random_seq2seq, max_new_tokens=8, fallback=FixedSummarizer()
    )
    assert summarizer.kind == "seq2seq"
    assert summarizer.max_input_tokens is None  # T5's relative positions have no hard limit
    out = summarizer.summarize_many([_window(), _window("short")])
    assert [s.summary for s in out] == ["fallback summary", "fallback summary"]

    strict = TransformersSummarizer(random_seq2seq, max_new_tokens=8)
    with pytest.raises(SummaryParseError):
        strict.summarize(_window())


def test_prompt_longer_than_positions_is_a_clear_error(random_causal):
    summarizer = TransformersSummarizer(random_causal, max_new_tokens=500)
    assert summarizer.max_input_tokens == 12
    with pytest.raises(PromptTooLongError, match=r"window 0 renders to \d+ tokens .* accepts 12"):
        summarizer.summarize(_window())


def test_bad_arguments(tmp_path, random_causal):
    with pytest.raises(FileNotFoundError, match="not a local directory"):
        TransformersSummarizer(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="kind"):
        TransformersSummarizer(random_causal, kind="encoder")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fallback"):
        TransformersSummarizer(random_causal, fallback="extractive")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nothing to summarize"):
        TransformersSummarizer(random_causal).summarize(
            [Event(author="system", role="system", type="control")]
        )
