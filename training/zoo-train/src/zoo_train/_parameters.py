"""What a run trains: trainable and total parameters, their dtype and the compute dtype."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from ._precision import resolve_compute_dtype
from .parallel import platform_of
from .peft import LoRAConfig, apply_lora, count_params, lora_filter


def parameter_summary(
    model: Any, config: Any, lora: LoRAConfig | None, stored_dtype: str | None
) -> dict[str, Any]:
    """``{"trainable", "total", "param_dtype", "stored_dtype"}`` of a run of ``model`` (a model
    or a zero-argument builder), with LoRA adapters counted as they will be added; nothing is
    allocated."""
    abstract = (
        eqx.filter_eval_shape(model)
        if callable(model) and not isinstance(model, eqx.Module)
        else model
    )
    if lora is None:
        total = trainable = count_params(abstract)
    else:
        adapted = eqx.filter_eval_shape(
            lambda m: apply_lora(m, lora, key=jax.random.key(0)), abstract
        )
        total, trainable = count_params(adapted), count_params(adapted, lora_filter(adapted))
    return {
        "trainable": trainable,
        "total": total,
        "param_dtype": config.param_dtype,
        "stored_dtype": stored_dtype,
    }


def describe_parameters(summary: dict[str, Any], compute_dtype: str, mesh: Any) -> str:
    """One line: ``"parameters: 1,024 trainable of 60,416 (1.69%), float32 (stored as
    bfloat16: float32 master weights); compute bfloat16"``."""
    trainable, total = summary["trainable"], summary["total"]
    share = f" ({100 * trainable / total:.2f}%)" if trainable != total else ""
    dtype = summary["param_dtype"]
    stored = summary.get("stored_dtype")
    if stored is not None and stored != dtype:
        dtype += f" (stored as {stored}: {dtype} master weights, exported as {stored})"
    compute = resolve_compute_dtype(compute_dtype, platform_of(mesh))
    return f"parameters: {trainable:,} trainable of {total:,}{share}, {dtype}; compute {compute}"
