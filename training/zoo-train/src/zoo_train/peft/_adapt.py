"""The LoRA model transform a fine-tune trains: adapters added (or continued from a PEFT
adapter) and the filter that trains them alone."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import equinox as eqx
from jaxtyping import PRNGKeyArray, PyTree

from .._plan import is_builder
from ._format import check_peft_targets, load_adapters
from ._lora import LoRAConfig, apply_lora, lora_filter


def add_adapters(
    model: PyTree | Callable[[], PyTree],
    lora: LoRAConfig,
    *,
    key: PRNGKeyArray,
    adapter_from: str | pathlib.Path | None = None,
) -> tuple[PyTree | Callable[[], PyTree], PyTree[bool]]:
    """``(adapted, trainable)``: ``model`` with LoRA adapters (seeded by ``key``; their values
    read from the PEFT adapter directory ``adapter_from`` when given) and the ``eqx.partition``
    filter that is true on the adapters alone.

    ``model`` may be a zero-argument builder: ``adapted`` is then a builder too, and nothing is
    allocated here (the filter comes from the model's shapes).

    Raises:
        ValueError: no projection matches the targets, or an adapted projection could not be
            saved as a PEFT adapter.
    """

    def adapt(m: PyTree) -> PyTree:
        adapted = apply_lora(m, lora, key=key)
        if adapter_from is not None:  # continue a PEFT adapter (a checkpoint, when resuming)
            adapted = load_adapters(adapted, adapter_from)
        return adapted

    if is_builder(model):
        build: Callable[[], PyTree] = model

        def adapted_builder() -> PyTree:
            return adapt(build())

        shapes = eqx.filter_eval_shape(lambda: apply_lora(build(), lora, key=key))
        check_peft_targets(shapes)  # before training: the adapters are saved in PEFT's format
        return adapted_builder, lora_filter(shapes)
    adapted: Any = apply_lora(model, lora, key=key)
    check_peft_targets(adapted)
    if adapter_from is not None:
        adapted = load_adapters(adapted, adapter_from)
    return adapted, lora_filter(adapted)
