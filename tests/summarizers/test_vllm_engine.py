"""VLLMSummarizer: the honest unavailable path here, and its batching glue.

vLLM needs a GPU and is not installed on this machine. The glue test stands in
a minimal ``vllm`` module for the ``LLM``/``SamplingParams`` surface only; the
tokenizer it hands out, the prompt and the parser are the real ones.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from types import SimpleNamespace
from typing import Any

import pytest

from mnemoray.sessions.events import Event, model_message, user_message
from mnemoray.summarizers.errors import ModelUnavailableError, SummaryParseError
from mnemoray.summarizers.llm_prompt import SUMMARY_JSON_SCHEMA, build_prompt

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|> {{ m.content }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _window(i: int) -> list[Event]:
    return [
        user_message(f"My cat is called Tom {i}.", timestamp=1_700_000_000),
        model_message("pet_bot", "Nice name!", timestamp=1_700_000_001),
    ]


def _answer(i: int) -> str:
    return json.dumps(
        {
            "summary": f"window {i}",
            "key_facts": [{"text": f"Has a cat named Tom {i}", "events": [0]}],
        }
    )


def _tokenizer(chat_template: str | None):
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    words = ["my", "cat", "is", "called", "tom", "<|user|>", "<|assistant|>"]
    vocab = {w: i for i, w in enumerate(["[UNK]", "[BOS]", *words])}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", bos_token="[BOS]"
    )
    fast.chat_template = chat_template
    return fast


class FakeLLM:
    """The ``vllm.LLM`` surface the backend uses, with scripted outputs."""

    instances: list[FakeLLM] = []
    tokenizer: Any = None
    finish_reason = "stop"
    answers: list[str] | None = None

    def __init__(self, model: str, **engine_kwargs: Any) -> None:
        self.model, self.engine_kwargs = model, engine_kwargs
        self.calls: list[tuple[list[Any], Any, dict[str, Any]]] = []
        FakeLLM.instances.append(self)

    def get_tokenizer(self):
        return FakeLLM.tokenizer

    def generate(self, prompts, sampling_params, **kw):
        self.calls.append((list(prompts), sampling_params, kw))
        answers = FakeLLM.answers or [_answer(i) for i in range(len(prompts))]
        return [
            SimpleNamespace(outputs=[SimpleNamespace(text=a, finish_reason=self.finish_reason)])
            for a in answers
        ]


class FakeSamplingParams:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class FakeGuide:
    def __init__(self, json: Any = None) -> None:
        self.json = json


@pytest.fixture
def fake_vllm(monkeypatch):
    """Install a stand-in ``vllm``; ``guide`` picks which structured-output class exists."""

    def install(guide: str | None = "StructuredOutputsParams", chat_template: str | None = None):
        vllm = types.ModuleType("vllm")
        vllm.LLM, vllm.SamplingParams = FakeLLM, FakeSamplingParams
        sampling = types.ModuleType("vllm.sampling_params")
        if guide:
            setattr(sampling, guide, FakeGuide)
        monkeypatch.setitem(sys.modules, "vllm", vllm)
        monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
        FakeLLM.instances, FakeLLM.tokenizer = [], _tokenizer(chat_template)
        FakeLLM.finish_reason, FakeLLM.answers = "stop", None
        from mnemoray.summarizers.vllm_engine import VLLMSummarizer

        return VLLMSummarizer

    return install


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_vllm_is_a_clear_error_and_importing_the_module_is_free():
    from mnemoray.summarizers.vllm_engine import VLLMSummarizer

    assert "vllm" not in sys.modules  # the module itself never imports vllm
    with pytest.raises(ModelUnavailableError, match=r"pip install -e '\.\[gpu\]'"):
        VLLMSummarizer("Qwen/Qwen2.5-0.5B-Instruct")


def test_summarize_many_is_one_generate_call_with_provenance(fake_vllm):
    VLLMSummarizer = fake_vllm("StructuredOutputsParams")
    summarizer = VLLMSummarizer("some/model", max_tokens=300, tensor_parallel_size=2)
    [llm] = FakeLLM.instances
    assert (llm.model, llm.engine_kwargs) == ("some/model", {"tensor_parallel_size": 2})

    windows = [_window(i) for i in range(3)]
    summaries = summarizer.summarize_many(windows)
    [(prompts, params, kw)] = llm.calls
    assert prompts == [build_prompt(w) for w in windows]  # no chat template: plain prompts
    assert kw == {"use_tqdm": False}
    assert params.kwargs["max_tokens"] == 300 and params.kwargs["temperature"] == 0.0
    assert summarizer.guided == "structured_outputs"
    assert params.kwargs["structured_outputs"].json == SUMMARY_JSON_SCHEMA
    assert [s.summary for s in summaries] == ["window 0", "window 1", "window 2"]
    assert [s.key_facts[0].source_event_ids for s in summaries] == [(w[0].id,) for w in windows]
    assert [s.source_event_ids for s in summaries] == [tuple(e.id for e in w) for w in windows]


def test_chat_template_prompts_go_in_as_token_ids(fake_vllm):
    VLLMSummarizer = fake_vllm(chat_template=CHAT_TEMPLATE)
    summarizer = VLLMSummarizer("some/model")
    summarizer.summarize(_window(0))
    [(prompts, _, _)] = FakeLLM.instances[0].calls
    text = f"<|user|> {build_prompt(_window(0))} <|assistant|>"
    expected = FakeLLM.tokenizer.encode(text, add_special_tokens=False)
    assert prompts == [{"prompt_token_ids": expected}]
    assert expected[0] == FakeLLM.tokenizer.get_vocab()["<|user|>"]  # no BOS added twice


@pytest.mark.parametrize(
    ("guide", "field"), [("GuidedDecodingParams", "guided_decoding"), (None, None)]
)
def test_guided_decoding_follows_the_installed_version(fake_vllm, guide, field):
    summarizer = fake_vllm(guide)("some/model")
    assert summarizer.guided == field
    if field:
        assert summarizer.sampling_params.kwargs[field].json == SUMMARY_JSON_SCHEMA
    else:
        assert set(summarizer.sampling_params.kwargs) == {"temperature", "max_tokens"}
    unguided = fake_vllm(guide)("some/model", guided_json=False)
    assert unguided.guided is None
    assert set(unguided.sampling_params.kwargs) == {"temperature", "max_tokens"}


def test_truncated_output_names_the_limit(fake_vllm):
    summarizer = fake_vllm()("some/model", max_tokens=16)
    FakeLLM.finish_reason, FakeLLM.answers = "length", ['{"summary": "User has a ca']
    with pytest.raises(SummaryParseError, match=r"^vllm: generation stopped at max_tokens=16"):
        summarizer.summarize(_window(0))
