"""The table of commands: each one's name, help, description, the function that declares its
arguments and the one that runs it (so go-to-definition leads from here to each command). The
command modules import only the standard library, the settings and the argument helpers at
the top; what a command runs on (JAX, the recipes) each imports when it runs, so ``zoo --help``
stays light (``tests/test_cli_imports.py`` holds it to that)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

from . import (
    _catalog,
    _compile,
    _data,
    _generate_text,
    _kernels,
    _metrics,
    _profile,
    _training,
    _use,
)


@dataclasses.dataclass(frozen=True)
class Command:
    """A ``zoo`` command: ``add_arguments(parser)`` declares its arguments and ``run(args)``
    returns its exit code (raising what :mod:`._exit` turns into one)."""

    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: tuple[Command, ...] = (
    Command(
        "train",
        "train a model from scratch",
        (
            "Train a model from scratch. With no arguments: a small byte-level Llama on the "
            "Python standard library's own source, into runs/default. Settings: defaults < "
            "--config FILE < --set KEY=VALUE < flags. Re-running into the same --out resumes."
        ),
        _training.add_train_arguments,
        _training.run_train,
    ),
    Command(
        "finetune",
        "fine-tune a Hugging Face or zoo model (full or LoRA)",
        (
            "Fine-tune a model from a Hugging Face directory (--from-hf) or a zoo run "
            "(--from-run): all weights, or LoRA adapters only (--lora-rank R). LoRA runs "
            "write the adapters alone to OUT/adapter; --export-hf DIR writes the merged "
            "model."
        ),
        _training.add_finetune_arguments,
        _training.run_finetune,
    ),
    Command(
        "generate",
        "sample text from a model, or chat with it (--chat)",
        (
            "Continue a prompt with a model (a zoo run directory or a Hugging Face "
            "directory). With --chat the prompt is a user message (after --system, if given) "
            "rendered with the model's chat template and its generation prompt, as "
            "fine-tuning rendered the data, and the reply stops at the template's end of "
            "turn. Without --prompt on a terminal: one prompt per line (with --chat, a "
            "conversation), until an empty line or Ctrl-D."
        ),
        _generate_text.add_generate_arguments,
        _generate_text.run_generate,
    ),
    Command(
        "eval",
        "held-out loss and perplexity, or benchmark tasks (--tasks)",
        (
            "Print the mean next-token loss and perplexity of a model on text (default: the "
            "held-out split of the stdlib corpus that `zoo train` evaluates on). With --tasks "
            "T1,T2: run lm-evaluation-harness tasks (its own, or YAML files of --include-path "
            "DIR) on the model, print lm-eval's table and write its JSON (--output FILE); the "
            "model is a run (--step N: that checkpoint), a Hugging Face directory, or one with "
            "a PEFT adapter (--adapter DIR)."
        ),
        _use.add_eval_arguments,
        _use.run_eval,
    ),
    Command(
        "convert",
        "Hugging Face <-> zoo",
        (
            "Convert SRC to DST: a Hugging Face directory becomes a zoo run directory "
            "(checkpoint at step 0); a zoo run directory becomes a Hugging Face directory "
            "(LoRA adapters merged). The direction follows SRC."
        ),
        _use.add_convert_arguments,
        _use.run_convert,
    ),
    Command(
        "compile",
        "compile the train step for a TPU topology you do not have: does it fit?",
        (
            "Lower and compile the real train step (forward, backward, optimizer update, with"
            " donation and shardings) for a TPU topology with libtpu's compile-only devices: "
            "no TPU and no weights needed. The step is the one `zoo train` or `zoo finetune` "
            "takes with the same settings (--from-hf DIR reads only its config.json; LoRA and"
            " --objective as there). Prints, per device, argument, output, temporary and peak"
            " bytes against the chip's HBM, and the optimizer state. Exit 0: it fits; 3: it "
            "does not; 2: a usage error."
        ),
        _compile.add_compile_arguments,
        _compile.run_compile,
    ),
    Command(
        "profile",
        "where the time of profiled train steps went",
        (
            "Read a trace captured by `zoo train --profile START:END` (give the run "
            "directory, its profile/ directory or a trace file) and print the time per step "
            "by category (attention by kernel and version, matmuls, other fused operations, "
            "host/idle gaps, evaluation and checkpoints) and the top operations. --compare "
            "BEFORE AFTER shows the change per category, e.g. across a kernel upgrade."
        ),
        _profile.add_profile_arguments,
        _profile.run_profile,
    ),
    Command(
        "data",
        "tokenize data once into a token store, describe a store, or check its content",
        (
            "Token stores: data tokenized once, read by row index by any number of processes."
            " `zoo data prepare SOURCE... --out STORE` makes one; `zoo data info STORE` "
            "describes one; `zoo data verify STORE` checks every block against its hash."
        ),
        _data.add_data_arguments,
        _data.run_data,
    ),
    Command(
        "metrics",
        "a run's summary and curves, or its metrics replayed into TensorBoard or W&B",
        (
            "Without --to: the run's summary (model, steps, kernel, losses, evaluation, "
            "throughput) and its curves, in the terminal. With --to: the records of "
            "RUN/metrics.jsonl (and its loss curve) sent to TensorBoard or W&B, as `zoo train"
            " --tracker` sends them while training: the same tags at the same steps. "
            "TensorBoard: into RUN/tensorboard (or --logdir DIR); events already there are "
            "left as they are, a stale or partial set of the run's own is replaced. W&B: a "
            "new W&B run, in the project, name and tags the run was given unless the flags "
            "say otherwise (WANDB_MODE=offline works)."
        ),
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
        (
            "List installed attention kernels (version, contract, the JAX each release was "
            "verified on; with --here, where each serves and whether it serves on this "
            "machine); `zoo kernels verify NAME` runs the conformance suite against NAME "
            "here."
        ),
        _kernels.add_kernels_arguments,
        _kernels.run_kernels,
    ),
)
