"""Fine-tuning: full or LoRA, from a Hugging Face directory or a zoo run; export to Hugging Face."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Mapping
from typing import Any

import jax
from jax.sharding import Mesh
from jaxtyping import PRNGKeyArray, PyTree

from zoo_data import DataSource

from .._config import TrainConfig
from .._loss import LossFn
from .._precision import cast_model
from ..loop import EvalSource, TrainResult, train
from ..parallel import is_primary, to_host
from ._format import check_peft_targets, load_adapters, save_adapters
from ._lora import LoRAConfig, apply_lora, lora_filter, merge_lora

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


def finetune(
    model: PyTree,
    data: DataSource,
    *,
    config: TrainConfig,
    out: str | pathlib.Path,
    eval_data: EvalSource | None = None,
    lora: LoRAConfig | None = None,
    key: PRNGKeyArray | None = None,
    run_info: dict[str, Any] | None = None,
    stop_at: int | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    mesh: Mesh | None = None,
    start_info: dict[str, Any] | None = None,
    adapter_from: str | pathlib.Path | None = None,
    loss_fn: LossFn | None = None,
) -> TrainResult:
    """Fine-tune ``model``: every floating-point array, or only LoRA adapters.

    With ``lora``, adapters are added (:func:`apply_lora`, seeded by ``key``) and only they
    train: the base is frozen by an ``eqx.partition`` spec (:func:`lora_filter`), so the
    optimizer state holds adapter parameters only; ``adapter_from`` (a PEFT adapter directory
    with ``lora``'s settings) gives their starting values. At the end the adapters alone are
    written to ``out/adapter/`` as a PEFT adapter directory (``adapter_model.safetensors``,
    ``adapter_config.json``). ``loss_fn`` replaces the next-token loss (e.g. a
    :class:`~zoo_train.preference.PreferenceLoss`). Resuming works as
    for :func:`train` (same ``out``); ``stop_at`` ends this call early, ``mesh`` lays the run
    out on devices and ``start_info`` goes into the start record, as there.

    Returns:
        The :class:`TrainResult`; ``result.model`` carries the adapters (see :func:`merge_lora`).
    """
    info = dict(run_info or {})
    trainable = None
    if lora is not None:
        model = apply_lora(model, lora, key=jax.random.key(0) if key is None else key)
        check_peft_targets(model)  # before training: the adapters are saved in PEFT's format
        if adapter_from is not None:  # continue a PEFT adapter (a checkpoint, when resuming)
            model = load_adapters(model, adapter_from)
        trainable = lora_filter(model)
        info["lora"] = lora.to_dict()
    result = train(
        model,
        data,
        config=config,
        out=out,
        eval_data=eval_data,
        loss_fn=loss_fn,
        trainable=trainable,
        run_info=info,
        stop_at=stop_at,
        on_record=on_record,
        mesh=mesh,
        start_info=start_info,
    )
    if lora is not None:
        adapted = to_host(result.model)  # every process joins the gather; process 0 writes
    if lora is not None and is_primary():
        save_adapters(
            adapted,
            pathlib.Path(out) / ADAPTER_DIR,
            lora,
            step=result.step,
            model_config=info.get("model_config"),
            init=info.get("init"),
        )
    return result


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
