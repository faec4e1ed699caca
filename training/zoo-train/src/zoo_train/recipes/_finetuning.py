"""``finetune``: the loop on a model fine-tuned fully or through LoRA adapters, the adapters
written as a PEFT adapter at the end."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.sharding import Mesh
from jaxtyping import PRNGKeyArray, PyTree

from zoo_data import DataSource

from .._config import TrainConfig
from .._loss import LossFn
from ..loop import EvalSource, StepEnd, TrainResult, TrainSpec, run_training
from ..parallel import is_primary, to_host
from ..peft import ADAPTER_DIR, LoRAConfig, add_adapters, save_adapters
from ..program import StepSpec


def finetune_step(
    model: PyTree | Callable[[], PyTree],
    config: TrainConfig,
    *,
    lora: LoRAConfig | None = None,
    key: PRNGKeyArray | None = None,
    adapter_from: str | pathlib.Path | None = None,
    loss_fn: LossFn | None = None,
    mesh: Mesh | None = None,
) -> StepSpec:
    """The step a fine-tune of ``model`` (a model or a builder) takes: every floating-point
    array trained, or LoRA adapters alone (added seeded by ``key``, their values from
    ``adapter_from`` when given), with ``loss_fn`` (``None``: the next-token loss).
    :func:`finetune` runs it; ``zoo compile`` compiles it."""
    trainable = None
    if lora is not None:
        key = jax.random.key(0) if key is None else key
        model, trainable = add_adapters(model, lora, key=key, adapter_from=adapter_from)
    return StepSpec(model, config, loss_fn=loss_fn, trainable=trainable, mesh=mesh)


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
    hooks: Sequence[tuple[Callable[[StepEnd], None], int | None]] = (),
    rollout: Any = None,
) -> TrainResult:
    """Fine-tune ``model``: every floating-point array, or only LoRA adapters.

    With ``lora``, adapters are added (:func:`~zoo_train.peft.add_adapters`, seeded by ``key``)
    and only they train: the base is frozen by an ``eqx.partition`` filter, so the optimizer
    state holds adapter parameters only; ``adapter_from`` (a PEFT adapter directory with
    ``lora``'s settings) gives their starting values. At the end the adapters alone are written
    to ``out/adapter/`` as a PEFT adapter directory (``adapter_model.safetensors``,
    ``adapter_config.json``). ``loss_fn`` replaces the next-token loss (e.g. a
    :class:`~zoo_train.preference.PreferenceLoss`), and ``rollout`` makes each step's batch
    (GRPO's :class:`~zoo_train.grpo.Rollout`). The other arguments (``hooks`` too) are those of
    :func:`~zoo_train.train`, and resuming works as there (same ``out``).

    Returns:
        The :class:`TrainResult`; ``result.model`` carries the adapters (see ``merge_lora``).
    """
    info = dict(run_info or {})
    if lora is not None:
        info["lora"] = lora.to_dict()
    step = finetune_step(
        model, config, lora=lora, key=key, adapter_from=adapter_from, loss_fn=loss_fn, mesh=mesh
    )
    spec = TrainSpec(
        step, data, pathlib.Path(out), eval_data, info, stop_at, on_record, start_info, hooks,
        rollout,
    )  # fmt: skip
    result = run_training(spec)
    if lora is not None:
        adapted = to_host(result.model)  # every process joins the gather; process 0 writes
    if lora is not None and is_primary():
        save_adapters(
            adapted,
            spec.out / ADAPTER_DIR,
            lora,
            step=result.step,
            model_config=info.get("model_config"),
            init=info.get("init"),
        )
    return result
