"""Summarizer backed by a local Hugging Face seq2seq or causal LM (never downloads)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from mnemoray.errors import InvalidInput
from mnemoray.sessions.events import Event
from mnemoray.summarizers.base import Summarizer
from mnemoray.summarizers.errors import ModelUnavailableError, PromptTooLongError
from mnemoray.summarizers.llm_base import Completion, LLMSummarizer
from mnemoray.summarizers.llm_prompt import render_for_tokenizer

ModelKind = Literal["auto", "seq2seq", "causal"]


def _position_limit(config: Any) -> int | None:
    """Learned absolute positions are a hard limit; relative ones (T5) are not."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for attr in ("max_position_embeddings", "n_positions"):
        value = getattr(text_config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


class TransformersSummarizer(LLMSummarizer):
    """Greedy generation with any local model directory, output parsed by ``parse_summary``.

    ``kind="auto"`` picks seq2seq for encoder-decoder configs, causal otherwise.
    The tokenizer's chat template is used when it has one. With ``fallback``
    set, a window whose output is unparseable is summarized by that
    Summarizer instead of raising ``SummaryParseError``.
    """

    name = "transformers"
    limit_option = "max_new_tokens"

    def __init__(
        self,
        model_path: str,
        max_new_tokens: int = 256,
        device: str = "cpu",
        kind: ModelKind = "auto",
        fallback: Summarizer | None = None,
        batch_size: int = 8,
    ) -> None:
        super().__init__(fallback)
        if kind not in ("auto", "seq2seq", "causal"):
            raise InvalidInput(f"{kind!r} is not one of auto, seq2seq, causal", field="kind")
        if max_new_tokens < 1 or batch_size < 1:
            raise InvalidInput("max_new_tokens and batch_size must be positive")
        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(
                f"model_path {model_path!r} is not a local directory; the "
                "transformers summarizer only loads local weights"
            )
        try:
            import torch
            from transformers import (
                AutoConfig,
                AutoModelForCausalLM,
                AutoModelForSeq2SeqLM,
                AutoTokenizer,
            )
        except ImportError as exc:
            raise ModelUnavailableError(
                f"the 'transformers' summarizer needs torch and transformers: {exc}"
            ) from exc

        config = AutoConfig.from_pretrained(path, local_files_only=True)
        if kind == "auto":
            kind = "seq2seq" if getattr(config, "is_encoder_decoder", False) else "causal"
        loader = AutoModelForSeq2SeqLM if kind == "seq2seq" else AutoModelForCausalLM
        self.kind: ModelKind = kind
        self.model_path = str(path)
        self.model_id = f"transformers:{path.name}"
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.device = device
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        # transformers annotates .to() on the class (self: PreTrainedModel), not the model.
        self.model = loader.from_pretrained(path, local_files_only=True).to(device).eval()  # type: ignore[arg-type]

        if self.tokenizer.pad_token is None:
            if self.tokenizer.eos_token is None:
                raise ValueError(f"{path}: tokenizer has neither a pad nor an eos token")
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if kind == "causal":
            self.tokenizer.padding_side = "left"  # new tokens must follow every prompt directly
        limit = _position_limit(config)
        # A causal model's new tokens share its positions with the prompt.
        self.max_input_tokens = (
            None if limit is None else (limit - max_new_tokens if kind == "causal" else limit)
        )
        if self.max_input_tokens is not None and self.max_input_tokens < 1:
            raise InvalidInput(
                f"max_new_tokens={max_new_tokens} leaves no room for a prompt in "
                f"a model with {limit} positions"
            )
        self._eos_ids = self._stop_ids()

    def _stop_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.tokenizer):
            value = getattr(source, "eos_token_id", None)
            ids.update(
                value if isinstance(value, (list, tuple)) else [] if value is None else [value]
            )
        return ids

    def render_input(self, events: Sequence[Event]) -> str:
        """The exact text fed to the model for one window."""
        return render_for_tokenizer(events, self.tokenizer, self.prompt)[0]

    def _complete(self, batches: Sequence[Sequence[Event]]) -> list[Completion]:
        completions: list[Completion] = []
        for start in range(0, len(batches), self.batch_size):
            completions += self._generate(batches[start : start + self.batch_size], start)
        return completions

    def _generate(self, batches: Sequence[Sequence[Event]], offset: int) -> list[Completion]:
        rendered = [render_for_tokenizer(events, self.tokenizer, self.prompt) for events in batches]
        # Templated text already carries BOS etc.; adding them again confuses the model.
        templated = rendered[0][1]
        enc = self.tokenizer(
            [text for text, _ in rendered],
            return_tensors="pt",
            padding=True,
            add_special_tokens=not templated,
        )
        lengths = enc["attention_mask"].sum(dim=1).tolist()
        if self.max_input_tokens is not None:
            causal = self.kind == "causal"
            reserved = f" with max_new_tokens={self.max_new_tokens}" if causal else ""
            for i, length in enumerate(lengths):
                if length > self.max_input_tokens:
                    raise PromptTooLongError(
                        f"window {offset + i} renders to {length} tokens but {self.model_id} "
                        f"accepts {self.max_input_tokens}{reserved}; summarize smaller windows"
                    )
        input_ids = enc["input_ids"].to(self.device)
        # Only ids and mask: some tokenizers add token_type_ids that decoders reject.
        with self._torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=enc["attention_mask"].to(self.device),
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                num_beams=1,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        if self.kind == "causal":
            output = output[:, input_ids.shape[1] :]  # keep only the new tokens
        completions = []
        for row in output.tolist():
            text = self.tokenizer.decode(row, skip_special_tokens=True)
            assert isinstance(text, str)  # one row decodes to one string
            completions.append(Completion(text=text, truncated=not self._eos_ids & set(row)))
        return completions
