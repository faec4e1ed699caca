"""The model a benchmark runs on: a zoo run (any step), a Hugging Face directory, or a Hugging
Face base model with a PEFT LoRA adapter merged in; placed on the mesh, with its tokenizer and
the tokens that end its generations."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping
from typing import Any

import jax
from jax.sharding import Mesh

import zoo_models

from .._model_sources import load_model
from .._run_directory import read_generation
from .._usage import UsageError
from ..parallel import tree_shardings
from ..peft import apply_lora, load_peft_weights, merge_lora, read_peft_config


@dataclasses.dataclass(frozen=True)
class EvalModel:
    """A loaded model and what evaluation needs beside it.

    Attributes:
        model: the model, its arrays on the mesh.
        tokenizer: its tokenizer.
        stop_tokens: where its generation stops, as ``transformers`` stops it.
        description: what was loaded, in words.
    """

    model: Any
    tokenizer: Any
    stop_tokens: tuple[int, ...]
    description: str


def load_eval_model(
    source: str,
    *,
    mesh: Mesh,
    rules: Mapping[str, Any],
    step: int | None = None,
    adapter: str | None = None,
    tokenizer: str | None = None,
    attention_implementation: str | None = None,
) -> EvalModel:
    """The model of ``source`` (a run, at ``step`` if given, or a Hugging Face directory) on
    ``mesh``; with ``adapter``, a PEFT LoRA adapter directory merged into the base model.

    Raises:
        UsageError: an adapter on a source that is not a Hugging Face directory, or one that
            does not fit the model.
    """
    if adapter is not None and not (pathlib.Path(source) / "config.json").is_file():
        raise UsageError(
            f"--adapter goes with a Hugging Face base model, and {source!r} is not one; pass "
            "the adapter's base model directory."
        )
    model, tok, what = load_model(
        source,
        attention_implementation=attention_implementation,
        mesh=mesh,
        rules=dict(rules),
        tokenizer=tokenizer,
        step=step,
    )
    if adapter is not None:
        model = _with_adapter(model, adapter, mesh, rules)
        what = f"{what} with the adapter {adapter}"
    stops = zoo_models.stop_token_ids(read_generation(source), tok)
    return EvalModel(model, tok, tuple(stops), what)


def _with_adapter(model: Any, adapter: str, mesh: Mesh, rules: Mapping[str, Any]) -> Any:
    """``model`` with the adapter folded into its weights (one forward pass as fast as the base
    model's), placed on ``mesh`` again."""
    try:
        adapted = apply_lora(model, read_peft_config(adapter), key=jax.random.key(0))
        merged = merge_lora(load_peft_weights(adapted, adapter))
    except (OSError, ValueError) as e:
        raise UsageError(f"The adapter {adapter!r} cannot be used: {e}") from None
    return jax.device_put(merged, tree_shardings(merged, mesh, rules))
