"""Summarizer running vLLM in-process (GPU machines); one engine call per batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mnemoray.sessions.events import Event
from mnemoray.summarizers.base import Summarizer
from mnemoray.summarizers.errors import ModelUnavailableError
from mnemoray.summarizers.llm_base import Completion, LLMSummarizer
from mnemoray.summarizers.llm_prompt import SUMMARY_JSON_SCHEMA, render_for_tokenizer

INSTALL_HINT = "install the [gpu] extra on a GPU machine: pip install -e '.[gpu]'"


def structured_output_kwargs() -> tuple[str | None, dict[str, Any]]:
    """SamplingParams kwargs constraining output to SUMMARY_JSON_SCHEMA, by vLLM version.

    vLLM >= 0.10.2 has ``StructuredOutputsParams`` (the older
    ``GuidedDecodingParams`` was removed in 0.12); older releases only have
    ``GuidedDecodingParams``; before 0.6.3 neither exists and decoding stays plain.
    Returns the SamplingParams field used (None for plain) and the kwargs.
    """
    try:
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError:
        pass
    else:
        return "structured_outputs", {
            "structured_outputs": StructuredOutputsParams(json=SUMMARY_JSON_SCHEMA)
        }
    try:
        from vllm.sampling_params import GuidedDecodingParams
    except ImportError:
        return None, {}
    return "guided_decoding", {"guided_decoding": GuidedDecodingParams(json=SUMMARY_JSON_SCHEMA)}


class VLLMSummarizer(LLMSummarizer):
    """``vllm.LLM`` loaded once; ``summarize_many`` is a single ``llm.generate`` call.

    ``engine_kwargs`` go to ``vllm.LLM`` (``tensor_parallel_size``,
    ``max_model_len``, ``gpu_memory_utilization``, ...). With ``guided_json``
    (default) decoding is constrained to the summary schema when the installed
    vLLM supports it. ``fallback`` works as in every LLM backend.
    """

    name = "vllm"
    limit_option = "max_tokens"

    def __init__(
        self,
        model: str,
        max_tokens: int = 512,
        temperature: float = 0.0,
        guided_json: bool = True,
        fallback: Summarizer | None = None,
        **engine_kwargs: Any,
    ) -> None:
        super().__init__(fallback)
        try:
            from vllm import LLM, SamplingParams
        except ImportError as exc:
            raise ModelUnavailableError(
                f"the 'vllm' summarizer needs vLLM, which is not installed ({exc}); "
                f"{INSTALL_HINT}. Without a GPU use the 'transformers' or 'openai' "
                "summarizer instead."
            ) from exc
        self.model = model
        self.model_id = f"vllm:{model}"
        self.max_tokens = max_tokens
        self.guided, guided_kwargs = structured_output_kwargs() if guided_json else (None, {})
        self.sampling_params = SamplingParams(
            temperature=temperature, max_tokens=max_tokens, **guided_kwargs
        )
        self.llm = LLM(model=model, **engine_kwargs)
        self.tokenizer = self.llm.get_tokenizer()

    def render_input(self, events: Sequence[Event]) -> str | dict[str, list[int]]:
        """The engine prompt for one window.

        A chat-templated text already holds BOS and friends, and vLLM would add
        them again when tokenizing a string, so it goes in as token ids.
        """
        text, templated = render_for_tokenizer(events, self.tokenizer, self.prompt)
        if templated:
            return {"prompt_token_ids": self.tokenizer.encode(text, add_special_tokens=False)}
        return text

    def _complete(self, batches: Sequence[Sequence[Event]]) -> list[Completion]:
        prompts = [self.render_input(events) for events in batches]
        # vLLM schedules the whole list itself (continuous batching) and keeps input order.
        outputs = self.llm.generate(prompts, self.sampling_params, use_tqdm=False)
        completions = []
        for request in outputs:
            best = request.outputs[0]
            completions.append(Completion(text=best.text, truncated=best.finish_reason == "length"))
        return completions
