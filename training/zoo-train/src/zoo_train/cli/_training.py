"""``zoo train`` and ``zoo finetune``: settings from their sources, then the recipe (one per
command, and one per ``--objective`` of ``zoo finetune``)."""

from __future__ import annotations

import argparse
from typing import cast

from .._usage import UsageError
from ..settings import FinetuneSettings, RunSettings, defaults, given_flags, resolve_settings
from ._multiprocess import add_process_flags, join_processes
from ._options import add_settings_flags


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
    """``zoo train``: the settings, then :func:`zoo_train.recipes.train`."""
    # The loop and recipes load JAX, Equinox, Optax and Orbax: not on the `--help` path.
    from ..loop import stop_requests
    from ..recipes import train

    s = settings_of(args, "train")
    join_processes(args, s)
    with stop_requests():  # from here on, SIGTERM, Ctrl-C and SIGHUP stop after a step, with a save
        return train(s)


def run_finetune(args: argparse.Namespace) -> int:
    """``zoo finetune``: the settings, then the recipe of ``--objective``."""
    # The loop and recipes load JAX, Equinox, Optax and Orbax: not on the `--help` path.
    from ..loop import stop_requests
    from ..recipes import distill, finetune_model_error, grpo, objective_error, preference, sft

    if "model" in vars(args):  # even the default preset's name
        raise finetune_model_error()
    s = cast(FinetuneSettings, settings_of(args, "finetune"))
    recipes = {"sft": sft, "dpo": preference, "ipo": preference, "simpo": preference,
               "orpo": preference, "grpo": grpo, "distill": distill}  # fmt: skip
    if s.objective not in recipes:
        raise objective_error(s.objective)
    join_processes(args, s)
    with stop_requests():
        return recipes[s.objective](s)
