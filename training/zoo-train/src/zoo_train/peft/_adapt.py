"""The LoRA model transform a fine-tune trains: adapters added (or continued from a PEFT
adapter) and the filter that trains them alone, and the hook that saves them."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import equinox as eqx
from jaxtyping import PRNGKeyArray, PyTree

from .._state_plan import is_builder
from ..parallel import is_primary, to_host
from ._lora import LoRAConfig, apply_lora, lora_filter
from ._peft_directory import check_peft_targets, load_adapters, save_adapters

if TYPE_CHECKING:  # a hook of the loop's; the loop knows nothing of adapters
    from ..loop import StepEnd


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


class SaveAdapters:
    """A trainer hook writing the LoRA adapters of the model being trained to ``directory`` as
    a PEFT adapter (``adapter_model.safetensors``, ``adapter_config.json``): add it with
    ``every=0`` to save them after a call's last step, as a fine-tune's result.

    The step's metrics are read first, so a run that ends on a non-finite loss saves nothing;
    every process joins the gather and process 0 writes. ``model_config`` and ``init`` (the
    run's facts) are recorded in the adapter's config; ``part`` picks the adapted model out of
    what is trained (a distillation's student).
    """

    def __init__(
        self,
        lora: LoRAConfig,
        directory: str | pathlib.Path,
        *,
        model_config: Mapping[str, Any] | None = None,
        init: Mapping[str, Any] | None = None,
        part: Callable[[Any], Any] = lambda trained: trained,
    ) -> None:
        self.lora = lora
        self.part = part
        self.directory = pathlib.Path(directory)
        self.model_config = model_config
        self.init = init

    def after_step(self, end: StepEnd) -> None:
        """Save the adapters of the model after ``end.step``."""
        assert end.view is not None  # the trainer gives every hook the run in progress
        end.view.drain()
        adapted = to_host(self.part(end.view.model()))
        if is_primary():
            save_adapters(
                adapted,
                self.directory,
                self.lora,
                step=end.step,
                model_config=self.model_config,
                init=self.init,
            )
