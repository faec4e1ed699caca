"""A fine-tuned model out: merged and written as a Hugging Face checkpoint; where a run keeps
its adapters; a tokenizer fitted to a model's vocabulary."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

from jaxtyping import PyTree

from .._precision import cast_model
from ..parallel import is_primary, to_host
from ._lora import merge_lora

ADAPTER_DIR = "adapter"


def fit_tokenizer(tokenizer: Any, vocab_size: int) -> Any:
    """``tokenizer``, or for a byte tokenizer whose specials do not fit the model's vocabulary,
    the same bytes without them (packing keeps documents apart by segment ids anyway).

    Raises:
        ValueError: the tokenizer has more ids than the model's vocabulary.
    """
    if tokenizer.vocab_size <= vocab_size:
        return tokenizer
    if type(tokenizer).__name__ == "ByteTokenizer" and vocab_size >= 256:
        import zoo_models

        eos = tokenizer.eos_id is not None and vocab_size >= 257
        bos = tokenizer.bos_id is not None and vocab_size >= 256 + eos + 1
        return zoo_models.ByteTokenizer(bos=bos, eos=eos)
    raise ValueError(
        f"The tokenizer has {tokenizer.vocab_size} ids but the model's vocabulary has "
        f"{vocab_size}; use the tokenizer the model was trained with."
    )


def export_hf(
    model: PyTree,
    path: str | pathlib.Path,
    *,
    dtype: str | None = None,
    generation: Mapping[str, Any] | None = None,
) -> pathlib.Path:
    """Write ``model`` (LoRA adapters merged into the base first) as a Hugging Face checkpoint,
    its parameters in ``dtype`` (default: the model's own), with the source checkpoint's
    ``generation`` settings (see ``zoo_models.save_hf``) so that it stops where the source did.

    In a multi-process run every process must call it (the weights are gathered from every
    host); process 0 writes.
    """
    import zoo_models

    merged = merge_lora(model)
    if dtype is not None:
        merged = cast_model(merged, dtype)
    merged = to_host(merged)
    if not is_primary():
        return pathlib.Path(path)
    return zoo_models.save_hf(merged, path, generation=generation)
