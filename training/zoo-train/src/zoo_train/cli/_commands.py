"""The table of commands: each one's name, help, arguments and what runs it."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

from . import _catalog, _compile, _data, _generate, _metrics, _profile, _train, _use


@dataclasses.dataclass(frozen=True)
class Command:
    """A ``zoo`` command: ``add_arguments(parser)`` declares its arguments, ``run(args)``
    returns its exit code (raising what :mod:`._exit` turns into one)."""

    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: tuple[Command, ...] = (
    Command(
        "train",
        _train.TRAIN_HELP,
        _train.TRAIN_DESCRIPTION,
        _train.add_train_arguments,
        _train.run_train,
    ),
    Command(
        "finetune",
        _train.FINETUNE_HELP,
        _train.FINETUNE_DESCRIPTION,
        _train.add_finetune_arguments,
        _train.run_finetune,
    ),
    Command(
        "generate",
        _generate.HELP,
        _generate.DESCRIPTION,
        _generate.add_generate_arguments,
        _generate.run_generate,
    ),
    Command(
        "eval",
        "held-out loss and perplexity",
        "Print the mean next-token loss and perplexity of a model on text (default: the "
        "held-out split of the stdlib corpus that `zoo train` evaluates on).",
        _use.add_eval_arguments,
        _use.run_eval,
    ),
    Command(
        "convert",
        "Hugging Face <-> zoo",
        "Convert SRC to DST: a Hugging Face directory becomes a zoo run directory (checkpoint "
        "at step 0); a zoo run directory becomes a Hugging Face directory (LoRA adapters "
        "merged). The direction follows SRC.",
        _use.add_convert_arguments,
        _use.run_convert,
    ),
    Command(
        "compile",
        _compile.HELP,
        _compile.DESCRIPTION,
        _compile.add_compile_arguments,
        _compile.run_compile,
    ),
    Command(
        "profile",
        _profile.HELP,
        _profile.DESCRIPTION,
        _profile.add_profile_arguments,
        _profile.run_profile,
    ),
    Command("data", _data.HELP, _data.DESCRIPTION, _data.add_data_arguments, _data.run_data),
    Command(
        "metrics",
        _metrics.HELP,
        _metrics.DESCRIPTION,
        _metrics.add_metrics_arguments,
        _metrics.run_metrics,
    ),
    Command(
        "models",
        "list the model presets",
        "List the model presets.",
        _catalog.add_models_arguments,
        _catalog.run_models,
    ),
    Command(
        "kernels",
        "list attention kernels, or verify one",
        "List installed attention kernels (version, contract, platforms, whether they serve "
        "here); `zoo kernels verify NAME` runs the conformance suite against NAME here.",
        _catalog.add_kernels_arguments,
        _catalog.run_kernels,
    ),
)
