"""``zoo train`` and ``zoo finetune``: settings from their sources, then the recipe."""

from __future__ import annotations

import argparse

from .._usage import UsageError
from ..settings import RunSettings, defaults, given_flags, resolve_settings
from ._options import add_settings_flags
from ._processes import add_process_flags, join_processes

TRAIN_HELP = "train a model from scratch"
TRAIN_DESCRIPTION = (
    "Train a model from scratch. With no arguments: a small byte-level Llama on the Python "
    "standard library's own source, into runs/default. Settings: defaults < --config FILE < "
    "--set KEY=VALUE < flags. Re-running into the same --out resumes."
)
FINETUNE_HELP = "fine-tune a Hugging Face or zoo model (full or LoRA)"
FINETUNE_DESCRIPTION = (
    "Fine-tune a model from a Hugging Face directory (--from-hf) or a zoo run (--from-run): all "
    "weights, or LoRA adapters only (--lora-rank R). LoRA runs write the adapters alone to "
    "OUT/adapter; --export-hf DIR writes the merged model."
)


def settings_of(args: argparse.Namespace, command: str) -> RunSettings:
    """The settings of ``command`` from the config file, ``--set`` and the flags given."""
    flags = given_flags(args, defaults(command))
    if "steps" in flags and "epochs" in flags:
        raise UsageError("Pass --steps or --epochs, not both (epochs set the steps).")
    return resolve_settings(
        command=command,
        config_file=args.config,
        assignments=args.assignments,
        flags=flags,
    )


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    add_settings_flags(p, "train")
    add_process_flags(p)


def add_finetune_arguments(p: argparse.ArgumentParser) -> None:
    add_settings_flags(p, "finetune")
    add_process_flags(p)


def run_train(args: argparse.Namespace) -> int:
    from ..loop import stop_requests
    from ..recipes import train_recipe

    s = settings_of(args, "train")
    join_processes(args, s)
    with stop_requests():  # from here on, SIGTERM, Ctrl-C and SIGHUP stop after a step, with a save
        return train_recipe(s)


def run_finetune(args: argparse.Namespace) -> int:
    from ..loop import stop_requests
    from ..recipes import finetune_model_error, finetune_recipe

    if "model" in vars(args):  # even the default preset's name
        raise finetune_model_error()
    s = settings_of(args, "finetune")
    join_processes(args, s)
    with stop_requests():
        return finetune_recipe(s)  # type: ignore[arg-type]
