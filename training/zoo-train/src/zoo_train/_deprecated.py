"""The ways to train that :class:`~zoo_train.Trainer` replaced, kept for one minor release
(zoo-train 0.10; removed in 0.11): each warns with a ``DeprecationWarning`` naming its
replacement and runs the same run through a ``Trainer``."""

from __future__ import annotations

import dataclasses
import pathlib
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
from jax.sharding import Mesh
from jaxtyping import PRNGKeyArray, PyTree

from zoo_data import DataSource

from ._loss import LossFn
from .checkpoint import run_lock
from .loop import EvalData, RolloutData, StepEnd, Trainer, TrainResult
from .parallel import is_primary, to_host
from .peft import ADAPTER_DIR, LoRAConfig, add_adapters, save_adapters
from .settings import TrainConfig

Hooks = Sequence[tuple[Callable[[StepEnd], None], int | None]]


def _warn(name: str, instead: str, *, depth: int = 1) -> None:
    """Warn the caller ``depth`` frames above the deprecated function."""
    warnings.warn(
        f"zoo_train.{name} is deprecated and will be removed in zoo-train 0.11; use {instead}.",
        DeprecationWarning,
        stacklevel=2 + depth,
    )


def _train(
    trainer: Trainer,
    data: DataSource,
    *,
    eval_data: EvalData | None,
    hooks: Hooks,
    rollout: Any,
    stop_at: int | None,
    on_record: Callable[[dict[str, Any]], None] | None,
    start_info: Mapping[str, Any] | None,
) -> TrainResult:
    for fn, every in hooks:
        trainer.add_hook(fn, every=every)
    if rollout is not None:
        data = RolloutData(data, rollout)
    return trainer.train(
        data, eval_data, stop_at=stop_at, on_record=on_record, start_info=start_info
    )


def train(
    model: PyTree,
    data: DataSource,
    *,
    config: TrainConfig,
    out: str | pathlib.Path,
    eval_data: EvalData | None = None,
    loss_fn: LossFn | None = None,
    trainable: Any = None,
    run_info: dict[str, Any] | None = None,
    stop_at: int | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    mesh: Mesh | None = None,
    start_info: dict[str, Any] | None = None,
    hooks: Hooks = (),
    rollout: Any = None,
) -> TrainResult:
    """Deprecated: ``Trainer(config, model, loss_fn, out, mesh=, trainable=,
    run_info=)``, ``add_hook`` for each hook, then ``.train(data, eval_data, stop_at=,
    on_record=, start_info=)`` (a ``rollout``: ``RolloutData(data, rollout)``)."""
    _warn("train", "zoo_train.Trainer(config, model, loss_fn, out).train(data)")
    # As before: another process's run in `out` is refused before anything is built.
    with run_lock(pathlib.Path(out), enabled=is_primary()):
        trainer = Trainer(
            config, model, loss_fn, out, mesh=mesh, trainable=trainable, run_info=run_info
        )
        return _train(
            trainer, data, eval_data=eval_data, hooks=hooks, rollout=rollout, stop_at=stop_at,
            on_record=on_record, start_info=start_info,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class StepSpec:
    """Deprecated: what a :class:`~zoo_train.Trainer` is built from (``model``, ``config``,
    ``loss_fn``, ``trainable``, ``mesh``); :func:`build_program` builds it."""

    model: PyTree | Callable[[], PyTree]
    config: TrainConfig
    loss_fn: LossFn | None = None
    trainable: Any = None
    mesh: Mesh | None = None

    def __post_init__(self) -> None:
        # Called by the dataclass's __init__: the caller is one frame further up.
        _warn(
            "program.StepSpec",
            "zoo_train.Trainer(config, model, loss_fn, mesh=, trainable=)",
            depth=2,
        )

    def trainer(self, out: str | pathlib.Path | None = None, **kwargs: Any) -> Trainer:
        """The :class:`~zoo_train.Trainer` of this spec."""
        return Trainer(
            self.config, self.model, self.loss_fn, out, mesh=self.mesh,
            trainable=self.trainable, **kwargs,
        )  # fmt: skip


def build_program(spec: StepSpec | Trainer) -> Trainer:
    """Deprecated: a :class:`~zoo_train.Trainer` has the program's ``mesh``, ``rules``,
    ``compute_dtype``, ``loss_fn``, ``plan``, ``train_step``, ``eval_step``, ``unit`` and
    ``resolve_kernels``."""
    _warn("program.build_program", "zoo_train.Trainer(...), which builds the steps")
    return spec if isinstance(spec, Trainer) else spec.trainer()


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """Deprecated: a call of the loop (see :func:`run_training`)."""

    step: StepSpec | Trainer
    data: DataSource
    out: pathlib.Path
    eval_data: EvalData | None = None
    run_info: Mapping[str, Any] | None = None
    stop_at: int | None = None
    on_record: Callable[[dict[str, Any]], None] | None = None
    start_info: Mapping[str, Any] | None = None
    hooks: Hooks = ()
    rollout: Any = None

    def __post_init__(self) -> None:
        _warn("loop.TrainSpec", "zoo_train.Trainer(...).train(data)", depth=2)


def run_training(spec: TrainSpec) -> TrainResult:
    """Deprecated: the loop on one :class:`TrainSpec`."""
    _warn("loop.run_training", "zoo_train.Trainer(...).train(data)")
    with run_lock(pathlib.Path(spec.out), enabled=is_primary()):
        step = spec.step
        info = dict(spec.run_info or {})
        if isinstance(step, Trainer):
            trainer = Trainer(
                step.config, step.model, step._loss_given, spec.out, mesh=step.mesh,
                trainable=step.trainable, run_info=info,
            )  # fmt: skip
        else:
            trainer = step.trainer(spec.out, run_info=info)
        return _train(
            trainer, spec.data, eval_data=spec.eval_data, hooks=spec.hooks, rollout=spec.rollout,
            stop_at=spec.stop_at, on_record=spec.on_record, start_info=spec.start_info,
        )  # fmt: skip


def _lora_trainer(
    model: PyTree | Callable[[], PyTree],
    config: TrainConfig,
    lora: LoRAConfig | None,
    key: PRNGKeyArray | None,
    adapter_from: str | pathlib.Path | None,
    loss_fn: LossFn | None,
    mesh: Mesh | None,
    out: str | pathlib.Path | None = None,
    run_info: Mapping[str, Any] | None = None,
) -> Trainer:
    trainable = None
    if lora is not None:
        key = jax.random.key(0) if key is None else key
        model, trainable = add_adapters(model, lora, key=key, adapter_from=adapter_from)
    return Trainer(config, model, loss_fn, out, mesh=mesh, trainable=trainable, run_info=run_info)


def finetune_step(
    model: PyTree | Callable[[], PyTree],
    config: TrainConfig,
    *,
    lora: LoRAConfig | None = None,
    key: PRNGKeyArray | None = None,
    adapter_from: str | pathlib.Path | None = None,
    loss_fn: LossFn | None = None,
    mesh: Mesh | None = None,
) -> Trainer:
    """Deprecated: ``zoo_train.peft.add_adapters`` (with ``lora``), then a
    :class:`~zoo_train.Trainer` whose ``trainable`` is the adapters' filter."""
    _warn("recipes.finetune_step", "zoo_train.peft.add_adapters and zoo_train.Trainer")
    return _lora_trainer(model, config, lora, key, adapter_from, loss_fn, mesh)


def finetune(
    model: PyTree,
    data: DataSource,
    *,
    config: TrainConfig,
    out: str | pathlib.Path,
    eval_data: EvalData | None = None,
    lora: LoRAConfig | None = None,
    key: PRNGKeyArray | None = None,
    run_info: dict[str, Any] | None = None,
    stop_at: int | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    mesh: Mesh | None = None,
    start_info: dict[str, Any] | None = None,
    adapter_from: str | pathlib.Path | None = None,
    loss_fn: LossFn | None = None,
    hooks: Hooks = (),
    rollout: Any = None,
) -> TrainResult:
    """Deprecated: ``zoo_train.peft.add_adapters`` (with ``lora``), a
    :class:`~zoo_train.Trainer` training the adapters alone, and the
    :class:`~zoo_train.peft.SaveAdapters` hook writing them to ``out/adapter``."""
    _warn(
        "finetune",
        "zoo_train.peft.add_adapters, zoo_train.Trainer and the zoo_train.peft.SaveAdapters hook",
    )
    info = dict(run_info or {})
    if lora is not None:
        info["lora"] = lora.to_dict()
    with run_lock(pathlib.Path(out), enabled=is_primary()):
        trainer = _lora_trainer(model, config, lora, key, adapter_from, loss_fn, mesh, out, info)
        result = _train(
            trainer, data, eval_data=eval_data, hooks=hooks, rollout=rollout, stop_at=stop_at,
            on_record=on_record, start_info=start_info,
        )  # fmt: skip
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


def train_grpo(
    model: PyTree,
    prompts: Sequence[Any],
    rewards: Any,
    tokenizer: Any,
    *,
    grpo: Any,
    config: TrainConfig,
    out: str | pathlib.Path,
    max_prompt_length: int,
    stop_tokens: Sequence[int] = (),
    reference: str | None = None,
    reference_model: Any = None,
    trainable: Any = None,
    mesh: Mesh | None = None,
    sample_every: int | None = None,
    hooks: Hooks = (),
    **train_kwargs: Any,
) -> TrainResult:
    """Deprecated: ``zoo_train.grpo.grpo_parts`` (the prompt source, the rollout and the
    loss), a :class:`~zoo_train.Trainer` with the loss and the
    :class:`~zoo_train.grpo.CompletionLog` hook, trained on ``RolloutData(source,
    rollout)``."""
    from .grpo import CompletionLog, grpo_parts

    _warn("grpo.train_grpo", "zoo_train.grpo.grpo_parts, zoo_train.Trainer and RolloutData")
    out = pathlib.Path(out)
    source, rollout, loss = grpo_parts(
        prompts, rewards, tokenizer, grpo=grpo, config=config,
        max_prompt_length=max_prompt_length, stop_tokens=stop_tokens, reference=reference,
        reference_model=reference_model, mesh=mesh,
    )  # fmt: skip
    run_info = dict(train_kwargs.pop("run_info", None) or {})
    unknown = set(train_kwargs) - {"eval_data", "stop_at", "on_record", "start_info"}
    if unknown:
        raise TypeError(f"train_grpo() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    run_info["grpo"] = grpo.to_dict()
    run_info["rewards"] = {"names": list(rewards.names), "weights": list(rewards.weights)}
    with run_lock(out, enabled=is_primary()):
        trainer = Trainer(
            config, model, loss, out, mesh=mesh, trainable=trainable, run_info=run_info
        )
        all_hooks = list(hooks)
        if sample_every is not None:
            all_hooks.append((CompletionLog(rollout, out).after_step, sample_every))
        return _train(
            trainer, source, eval_data=train_kwargs.pop("eval_data", None), hooks=all_hooks,
            rollout=rollout, stop_at=train_kwargs.pop("stop_at", None),
            on_record=train_kwargs.pop("on_record", None),
            start_info=train_kwargs.pop("start_info", None),
        )  # fmt: skip
