"""A sentence-transformers model folder as the local runtimes (ONNX, CUDA) read it."""

from __future__ import annotations

import json
from pathlib import Path

from mnemoray.embedders.base import (
    PACKAGED_MODEL_ID,
    EmbedderError,
    is_local_path,
    packaged_model_path,
)


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_json_list(path: Path) -> list[dict] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        return None
    return sorted(data, key=lambda m: m.get("idx", 0))


class StLayout:
    """What the local runtimes (ONNX, CUDA) need from a sentence-transformers folder,
    checked up front: exactly Transformer -> mean Pooling (-> Normalize), a fast tokenizer."""

    def __init__(self, root: Path) -> None:
        modules = read_json_list(root / "modules.json")
        if modules is None:
            raise EmbedderError(
                f"{root} has no readable modules.json (a "
                "sentence-transformers model folder is needed)",
                field="model",
            )
        kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            raise EmbedderError(
                f"this runtime supports Transformer + mean Pooling "
                f"(+ Normalize) models; {root} has {kinds}",
                field="model",
            )
        self.transformer_dir = root / str(modules[0].get("path", ""))
        pooling_file = root / str(modules[1].get("path", "")) / "config.json"
        pooling = read_json(pooling_file) or {}
        mode = pooling.get("pooling_mode")
        others = [
            v
            for k, v in pooling.items()
            if k.startswith("pooling_mode_")
            and k != "pooling_mode_mean_tokens"
            and isinstance(v, bool)
        ]
        mean_only = (
            mode == "mean"
            if mode is not None
            else bool(pooling.get("pooling_mode_mean_tokens")) and not any(others)
        )
        if not mean_only:
            raise EmbedderError(
                f"this runtime supports mean pooling only; {pooling_file} says {pooling}",
                field="model",
            )
        st_config = read_json(self.transformer_dir / "sentence_bert_config.json") or {}
        config = read_json(self.transformer_dir / "config.json")
        if config is None:
            raise EmbedderError(
                f"{self.transformer_dir} has no readable config.json", field="model"
            )
        max_positions = int(config.get("max_position_embeddings") or 512)
        self.max_seq_length = min(
            int(st_config.get("max_seq_length") or max_positions), max_positions
        )
        self.do_lower_case = bool(st_config.get("do_lower_case", False))
        self.tokenizer_file = self.transformer_dir / "tokenizer.json"
        if not self.tokenizer_file.is_file():
            raise EmbedderError(
                f"{self.transformer_dir} has no tokenizer.json (a fast tokenizer is needed)",
                field="model",
            )
        weights = [self.transformer_dir / n for n in ("model.safetensors", "pytorch_model.bin")]
        weights = [w for w in weights if w.is_file()]
        if not weights:
            raise EmbedderError(f"{self.transformer_dir} has no model weights", field="model")
        self.files = [
            root / "modules.json",
            pooling_file,
            self.transformer_dir / "config.json",
            self.tokenizer_file,
            weights[0],
        ]
        sbert = self.transformer_dir / "sentence_bert_config.json"
        if sbert.is_file():
            self.files.append(sbert)


def resolve_st_folder(model: str | Path | None) -> tuple[Path, str]:
    """(local folder, model_id) exactly as SentenceTransformerEmbedder names the model."""
    if model is None:
        return packaged_model_path(), PACKAGED_MODEL_ID
    if not str(model).strip():
        raise EmbedderError("must be a non-empty path or model name", field="model")
    if is_local_path(model):
        path = Path(model).expanduser()
        if not path.is_dir():
            raise EmbedderError(f"embedding model folder does not exist: {path}", field="model")
        return path, str(model)
    try:  # a hub name: the local snapshot (offline when the caller set HF_HUB_OFFLINE=1)
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(model))), str(model)
    except Exception as exc:
        raise EmbedderError(
            f"could not resolve embedding model {model!r}: {exc}", field="model"
        ) from exc


__all__ = ["StLayout", "read_json", "read_json_list", "resolve_st_folder"]
