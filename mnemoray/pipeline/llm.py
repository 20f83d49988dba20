"""Summarization with vLLM on GPUs through ``ray.data.llm`` (``--summarizer vllm``).

Three stages replace ``Distill``, and produce the same records as the
in-process ``vllm`` backend:

1. ``PlanPrompts`` (CPU actors, tokenizer loaded once): picks the current
   copy of each session (``mark_current``), asks the core which events its
   summarizer would read (``distill.summary_inputs``) and renders them with
   the shared prompt code (``llm_prompt.render_for_tokenizer``, i.e.
   ``build_messages``/``build_prompt`` through the model's chat template). A
   templated prompt goes in as token ids without added special tokens,
   exactly like ``VLLMSummarizer.render_input``.
2. the ``ray.data.llm`` processor (``vLLMEngineProcessorConfig`` +
   ``build_processor``; its own chat-template and tokenize stages are off,
   since step 1 did both): one vLLM engine per GPU replica, continuous
   batching, guided JSON decoding with the shared ``SUMMARY_JSON_SCHEMA``.
3. ``FinishDistill`` (CPU actors): ``distill_sessions`` with a
   ``ReplaySummarizer`` holding the generated text, so parsing
   (``parse_summary``), citation mapping and ``fallback`` are the in-process
   backend's own code.

Rows with nothing to summarize (tally-only rows, older copies, sessions without
text) still pass through the engine (every row of a processor does) as a
one-token request, which keeps input order and costs next to nothing.
vLLM is imported only by the engine actors; a CPU run never needs it.
"""

from __future__ import annotations

import importlib.util
import json
import pickle
from typing import Any

import pyarrow as pa

from mnemoray.backfill.busy import Busy
from mnemoray.backfill.steps import distill_sessions, mark_current
from mnemoray.errors import ConfigError
from mnemoray.memory.records.distill import summary_inputs
from mnemoray.memory.store.protocol import open_backend
from mnemoray.memory.store.scopes import ScopePolicy
from mnemoray.pipeline.rows import ITEM, STATS, lighten, pack, unpack
from mnemoray.summarizers import Summarizer, get_summarizer
from mnemoray.summarizers.errors import ModelUnavailableError
from mnemoray.summarizers.llm_base import Completion, ReplaySummarizer
from mnemoray.summarizers.llm_prompt import SUMMARY_JSON_SCHEMA, render_for_tokenizer
from mnemoray.summarizers.vllm_engine import INSTALL_HINT

PROMPT, TOKENS, NEEDED = "prompt", "tokenized_prompt", "llm_needed"
COMPLETION, GENERATED = "completion", "num_generated_tokens"
PLACEHOLDER = "."  # the prompt of a row with nothing to summarize (max_tokens=1)
# Options of the in-process backend that are not vLLM engine kwargs.
SAMPLING_OPTIONS = ("max_tokens", "temperature", "guided_json", "fallback")


def require_vllm() -> None:
    """A clear error, before any work starts, when vLLM is not installed."""
    if importlib.util.find_spec("vllm") is None:
        raise ModelUnavailableError(
            f"--summarizer vllm runs vLLM through ray.data.llm, and vLLM is not installed; "
            f"{INSTALL_HINT}. Without GPUs use --summarizer extractive (or transformers / "
            f"openai with --summarizer-option)."
        )


def split_options(options: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(model, sampling options, engine kwargs) from ``--summarizer-option`` values."""
    opts = dict(options)
    model = opts.pop("model", None)
    if not isinstance(model, str) or not model:
        raise ConfigError(
            "--summarizer vllm needs --summarizer-option model=<path or hub name>",
            field="summarizer_options.model",
        )
    sampling = {k: opts.pop(k) for k in SAMPLING_OPTIONS if k in opts}
    return model, sampling, opts


def sampling_params(max_tokens: int, temperature: float, guided_json: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"max_tokens": int(max_tokens), "temperature": float(temperature)}
    if guided_json:
        params["structured_outputs"] = {"json": SUMMARY_JSON_SCHEMA}
    return params


class PlanPrompts:
    """``map_batches`` callable: adds the prompt (and token ids) of every row."""

    def __init__(self, model: str, tokenizer: Any = None) -> None:
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model)
        self.tokenizer = tokenizer
        self.templated = bool(getattr(tokenizer, "chat_template", None))
        self.placeholder_ids = list(tokenizer.encode(PLACEHOLDER, add_special_tokens=False))

    def __call__(self, batch: pa.Table) -> pa.Table:
        busy = Busy()
        items, stats, _ = unpack(batch)
        items = mark_current(items)
        prompts: list[str] = []
        tokens: list[list[int]] = []
        needed: list[bool] = []
        for item in items:
            events = summary_inputs(item.session) if item.current else []
            if events:
                text, templated = render_for_tokenizer(events, self.tokenizer)
                prompts.append(text)
                tokens.append(
                    list(self.tokenizer.encode(text, add_special_tokens=False)) if templated else []
                )
            else:
                prompts.append(PLACEHOLDER)
                tokens.append(self.placeholder_ids)
            needed.append(bool(events))
        table = pack(items, [*stats, busy.tally("plan")])
        if not items:  # the tally's own row
            prompts, tokens, needed = [PLACEHOLDER], [self.placeholder_ids], [False]
        table = table.append_column(PROMPT, pa.array(prompts, pa.string()))
        table = table.append_column(NEEDED, pa.array(needed, pa.bool_()))
        if self.templated:
            table = table.append_column(TOKENS, pa.array(tokens, pa.list_(pa.int64())))
        return table


def build_llm_stage(
    model: str,
    sampling: dict[str, Any],
    engine_kwargs: dict[str, Any],
    *,
    concurrency: int,
    batch_size: int,
    accelerator_type: str | None = None,
):
    """The ``ray.data.llm`` processor: Dataset (with ``PlanPrompts`` columns) -> Dataset."""
    require_vllm()
    from ray.data import llm as data_llm

    # build_llm_processor: the name before Ray 2.5x (the installed Ray has build_processor).
    build = getattr(data_llm, "build_processor", None) or data_llm.build_llm_processor  # type: ignore[attr-defined]
    config = data_llm.vLLMEngineProcessorConfig(
        model_source=model,
        engine_kwargs=engine_kwargs,
        concurrency=concurrency,
        batch_size=batch_size,
        accelerator_type=accelerator_type,
        chat_template_stage=False,
        tokenize_stage=False,
        detokenize_stage=False,
    )
    full = dict(sampling)
    tiny = {"max_tokens": 1, "temperature": 0.0}

    def preprocess(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "sampling_params": dict(full if row[NEEDED] else tiny)}

    def postprocess(row: dict[str, Any]) -> dict[str, Any]:
        return {
            ITEM: row[ITEM],
            STATS: row[STATS],
            NEEDED: row[NEEDED],
            COMPLETION: row.get("generated_text") or "",
            GENERATED: int(row.get(GENERATED) or 0),
        }

    return build(config, preprocess=preprocess, postprocess=postprocess)


class FinishDistill:
    """``map_batches`` callable: replays each generated text through ``distill_sessions``."""

    def __init__(
        self,
        store_dir: str,
        shards: int,
        max_tokens: int,
        fallback: str | Summarizer | None = None,
        chunk_turns: int = 4,
        ttl_s: float | None = None,
        scopes: ScopePolicy | None = None,
    ) -> None:
        self.store = open_backend(store_dir, shards)
        self.max_tokens = max_tokens
        self.fallback = get_summarizer(fallback) if isinstance(fallback, str) else fallback
        self.chunk_turns = chunk_turns
        self.ttl_s = ttl_s
        self.scopes = scopes

    def __call__(self, batch: pa.Table) -> pa.Table:
        busy = Busy()
        out, bad, stats = [], [], []
        for row in batch.to_pylist():
            if row[STATS] is not None:
                stats.append(json.loads(row[STATS]))
            if row[ITEM] is None:
                continue
            item = pickle.loads(row[ITEM])
            if not item.current:  # an older copy: ledgered, its newer copy carries the records
                out.append(item)
                continue
            completions = (
                [Completion(row[COMPLETION], truncated=row[GENERATED] >= self.max_tokens)]
                if row[NEEDED]
                else []
            )
            replay = ReplaySummarizer(
                completions, name="vllm", max_tokens=self.max_tokens, fallback=self.fallback
            )
            done, failed = distill_sessions(
                [item], replay, chunk_turns=self.chunk_turns, ttl_s=self.ttl_s, scopes=self.scopes
            )
            out.extend(done)
            bad.extend(failed)
        if bad:
            self.store.quarantine(bad)
        return pack(
            [lighten(i) for i in out],
            [*stats, {"quarantined": len(bad), "summarizer": "vllm", **busy.tally("distill")}],
        )
