"""zoo-train: the training loop core, data pipeline, checkpoints and metrics of zoo.

:class:`Trainer` is the one way to train: built from one config, a model (or a function that
builds it), a loss function and an output directory; ``add_hook``; ``train(data)``. It works
on any Equinox model with a loss function; see the package README for the API.
Every public name is imported on first use (PEP 562), so that ``import zoo_train`` (and the
``zoo`` command's ``--help``) does not load JAX, Equinox, Optax and Orbax before they are needed.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.10.0.dev0"

#: Subpackages, imported on first use.
_SUBPACKAGES = ("aot", "checkpoint", "data", "loop", "parallel", "peft", "recipes", "tracking")
#: The module that defines each public name, imported on first use.
_EXPORTS: dict[str, str] = {
    "provenance_changes": "._changes",
    "step_compiler_options": "._xla_options",
    "OptimizerConfig": ".settings",
    "TrainConfig": ".settings",
    "CheckpointMismatchError": "._errors",
    "CheckpointWriteError": "._errors",
    "NonFiniteLossError": "._errors",
    "NoUsableCheckpointError": "._errors",
    "RunLockedError": "._errors",
    "StepInterruptedError": "._errors",
    "StoppedBySignalError": "._errors",
    "evaluate_model": "._inference",
    "new_token_budget": "._inference",
    "sample_text": "._inference",
    "LossFn": "._loss",
    "make_lm_loss": "._loss",
    "model_token_losses": "._loss",
    "token_losses": "._loss",
    "cap_malloc_arenas": "._malloc",
    "default_decay_mask": "._optim",
    "make_optimizer": "._optim",
    "make_schedule": "._optim",
    "StatePlan": "._state_plan",
    "plan_state": "._state_plan",
    "cast_floating": "._precision",
    "resolve_compute_dtype": "._precision",
    "provenance": "._provenance",
    "check_requirement": "._requirements",
    "LoadedRun": "._run_directory",
    "load_run": "._run_directory",
    "TrainState": "._state",
    "init_train_state": "._state",
    "accumulate_gradients": "._step",
    "make_eval_step": "._step",
    "make_train_step": "._step",
    "split_micro_batches": "._step",
    "PackedMetrics": "._step_metrics",
    "StepMetrics": "._step_metrics",
    "Window": "._step_metrics",
    "UsageError": "._usage",
    "Checkpointer": ".checkpoint",
    "Restored": ".checkpoint",
    "fingerprints": ".checkpoint",
    "state_leaves": ".checkpoint",
    "CHECKPOINT_DIR": ".loop",
    "METRICS_FILE": ".loop",
    "PLOT_FILE": ".loop",
    "EvalSource": ".loop",
    "Hook": ".loop",
    "LoopView": ".loop",
    "MetricsWriter": ".loop",
    "Progress": ".loop",
    "RolloutData": ".loop",
    "StepEnd": ".loop",
    "Trainer": ".loop",
    "TrainResult": ".loop",
    "plot_loss_curve": ".loop",
    "read_metrics": ".loop",
    "ADAPTER_CONFIG": ".peft",
    "ADAPTER_FILE": ".peft",
    "LoRAConfig": ".peft",
    "LoRALinear": ".peft",
    "adapter_arrays": ".peft",
    "apply_lora": ".peft",
    "count_params": ".peft",
    "export_hf": ".peft",
    "fit_tokenizer": ".peft",
    "load_adapters": ".peft",
    "lora_filter": ".peft",
    "merge_lora": ".peft",
    "save_adapters": ".peft",
    # Kept for one minor release (zoo-train 0.10), each warning when called: Trainer.
    "finetune": "._deprecated",
    "train": "._deprecated",
}


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBPACKAGES, *_EXPORTS})


__all__ = [*_SUBPACKAGES, *_EXPORTS]
