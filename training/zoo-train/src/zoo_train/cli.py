"""zoo: train, fine-tune, sample, evaluate and convert zoo language models.

Commands (zoo COMMAND --help for each):

  zoo train                       train a model (default: a small byte-level Llama on the stdlib)
  zoo finetune --from-hf DIR      fine-tune a Hugging Face or zoo model, fully or with LoRA
  zoo generate RUN_OR_HF_DIR      sample text
  zoo eval RUN_OR_HF_DIR          held-out loss and perplexity
  zoo convert SRC DST             Hugging Face directory <-> zoo run directory
  zoo compile --topology v5e:2x2  compile the train step for a TPU topology: does it fit?
  zoo profile RUN                 where the time of `zoo train --profile A:B` steps went
  zoo models                      the model presets
  zoo kernels [verify NAME]       installed attention kernels / run the conformance suite
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ._malloc import cap_malloc_arenas
from ._settings import FINETUNE_DEFAULTS, SCHEMA, resolve_settings
from ._usage import UsageError

PROG = "zoo"


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        message = message[0].upper() + message[1:] if message else "Bad arguments"
        self.exit(2, f"{self.prog}: error: {message.rstrip('.')}; see `{self.prog} --help`.\n")


# Flags of `zoo train` / `zoo finetune`: (flag, settings key, type, metavar).
_RUN_FLAGS: list[tuple[str, str, Any, str]] = [
    ("--model", "model", str, "PRESET"),
    ("--out", "out", str, "DIR"),
    ("--steps", "steps", int, "N"),
    ("--batch-size", "batch_size", int, "N"),
    ("--seq-len", "seq_len", int, "N"),
    ("--grad-accum", "grad_accum", int, "N"),
    ("--stop-at", "stop_at", int, "STEP"),
    ("--save-every", "save_every", int, "N"),
    ("--lr", "lr", float, "LR"),
    ("--eval-every", "eval_every", int, "N"),
    ("--log-every", "log_every", int, "N"),
    ("--seed", "seed", int, "N"),
    ("--max-bytes", "max_bytes", int, "N"),
    ("--sample-tokens", "sample_tokens", int, "N"),
    ("--prompt", "prompt", str, "TEXT"),
    ("--attention-implementation", "attention.implementation", str, "KERNEL"),
    ("--attention-require", "attention.require", str, "REQ"),
    ("--profile", "profile", str, "START:END"),
]
_FINETUNE_FLAGS: list[tuple[str, str, Any, str]] = [
    ("--from-hf", "from_hf", str, "DIR"),
    ("--from-run", "from_run", str, "DIR"),
    ("--export-hf", "export_hf", str, "DIR"),
    ("--tokenizer", "tokenizer", str, "PATH"),
    ("--lora-rank", "lora.rank", int, "R"),
    ("--lora-alpha", "lora.alpha", float, "ALPHA"),
    ("--lora-from", "lora.from", str, "ADAPTER_DIR"),
]


MESH_HELP = (
    "device mesh: sizes of the data, fsdp and tensor axes, -1 = every device left over "
    "(default: data=1,fsdp=-1,tensor=1, i.e. every device fully sharded)"
)


def _add_mesh_flag(p: argparse.ArgumentParser, *, default: Any = argparse.SUPPRESS) -> None:
    p.add_argument("--mesh", metavar="AXIS=N,...", default=default, help=MESH_HELP)


def _add_tokenizer_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tokenizer",
        metavar="PATH",
        default=None,
        help="tokenizer directory or tokenizer.json (default: the model's own; required for a "
        "Hugging Face directory without one)",
    )


def _versions() -> str:
    """``zoo --version``: every installed zoo distribution and its version."""
    from importlib import metadata

    names = sorted(
        {
            d.metadata["Name"]
            for d in metadata.distributions()
            if (d.metadata["Name"] or "").lower().startswith("zoo-")
        },
        key=str.lower,
    )
    return "\n".join(f"{n} {metadata.version(n)}" for n in names)


def _add_process_flags(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group(
        "several processes (one per host; JAX detects TPU pods, SLURM and Open MPI by itself)"
    )
    group.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        default=None,
        help="process 0's address and a free port, the same for every process (env ZOO_COORDINATOR)",
    )
    group.add_argument(
        "--num-processes",
        type=int,
        metavar="N",
        default=None,
        help="how many processes run the job (env ZOO_NUM_PROCESSES)",
    )
    group.add_argument(
        "--process-id",
        type=int,
        metavar="I",
        default=None,
        help="this process's index, 0 ... N-1 (env ZOO_PROCESS_ID)",
    )


def _add_run_flags(p: argparse.ArgumentParser, *, finetune: bool) -> None:
    p.add_argument(
        "--config", metavar="FILE", help="TOML or JSON file of settings (see the README)"
    )
    p.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="assignments",
        help="set any setting, e.g. --set optimizer.warmup_steps=20 --set model_config.n_layers=4",
    )
    for flag, help_text in (
        (
            "--data",
            "text files, directories, globs or .jsonl (default: the Python stdlib's source)",
        ),
        ("--eval-data", "held-out data to evaluate on instead of a split of --data"),
    ):
        p.add_argument(
            flag,
            dest=flag[2:].replace("-", "_"),
            nargs="+",
            metavar="PATH",
            default=argparse.SUPPRESS,
            help=help_text,
        )
    flags = _RUN_FLAGS + (_FINETUNE_FLAGS if finetune else [])
    for flag, key, kind, metavar in flags:
        default = (
            FINETUNE_DEFAULTS.get(key, SCHEMA[key].default) if finetune else SCHEMA[key].default
        )
        # finetune takes its model from its source: --model is still parsed there, to be
        # refused with a sentence, but not offered with a default it would never use.
        hidden = finetune and key == "model"
        p.add_argument(
            flag,
            dest=key,
            type=kind,
            metavar=metavar,
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS if hidden else f"{SCHEMA[key].help} (default: {default})",
        )
    _add_mesh_flag(p)
    if finetune:
        _add_switch(p, "--overwrite", "overwrite", True, SCHEMA["overwrite"].help)
        p.add_argument(
            "--lora-targets",
            dest="lora.targets",
            nargs="+",
            metavar="T",
            default=argparse.SUPPRESS,
            help="projections to adapt: q k v o gate up down (default: q k v o; GPT-2 o up down)",
        )
    _add_switch(p, "--no-progress", "progress", False, "no progress bar")


def _add_switch(p: argparse.ArgumentParser, flag: str, key: str, value: bool, help: str) -> None:
    """A flag that sets the setting ``key`` to ``value`` (absent: the setting's own sources)."""
    p.add_argument(
        flag, dest=key, action="store_const", const=value, default=argparse.SUPPRESS, help=help
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``zoo`` argument parser."""
    parser = _Parser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=_versions(),
        help="print the version of every installed zoo package",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parser.set_defaults(_commands=sub.choices)

    train = sub.add_parser(
        "train",
        help="train a model from scratch",
        description="Train a model from scratch. With no arguments: a small byte-level Llama on "
        "the Python standard library's own source, into runs/default. Settings: defaults < "
        "--config FILE < --set KEY=VALUE < flags. Re-running into the same --out resumes.",
    )
    _add_run_flags(train, finetune=False)
    _add_process_flags(train)

    ft = sub.add_parser(
        "finetune",
        help="fine-tune a Hugging Face or zoo model (full or LoRA)",
        description="Fine-tune a model from a Hugging Face directory (--from-hf) or a zoo run "
        "(--from-run): all weights, or LoRA adapters only (--lora-rank R). LoRA runs write the "
        "adapters alone to OUT/adapter; --export-hf DIR writes the merged model.",
    )
    _add_run_flags(ft, finetune=True)
    _add_process_flags(ft)

    gen = sub.add_parser("generate", help="sample text from a model", description="Sample text.")
    gen.add_argument(
        "source", metavar="RUN_OR_HF_DIR", help="a zoo run directory or a Hugging Face directory"
    )
    gen.add_argument("--prompt", default="def ", help="prompt text (default: 'def ')")
    gen.add_argument("--max-new-tokens", type=int, default=200, metavar="N")
    gen.add_argument("--temperature", type=float, default=0.8)
    gen.add_argument("--top-k", type=int, default=None, metavar="K")
    gen.add_argument("--top-p", type=float, default=None, metavar="P")
    gen.add_argument("--greedy", action="store_true", help="argmax decoding")
    gen.add_argument("--num-samples", type=int, default=1, metavar="N")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--attention-implementation", metavar="KERNEL", default=None)
    _add_tokenizer_flag(gen)
    _add_mesh_flag(gen, default=None)

    ev = sub.add_parser(
        "eval",
        help="held-out loss and perplexity",
        description="Print the mean next-token loss and perplexity of a model on text (default: "
        "the held-out split of the stdlib corpus that `zoo train` evaluates on).",
    )
    ev.add_argument("source", metavar="RUN_OR_HF_DIR")
    ev.add_argument("--data", nargs="+", metavar="PATH", help="text to evaluate on (all of it)")
    ev.add_argument(
        "--text-field",
        default=SCHEMA["text_field"].default,
        metavar="NAME",
        help=f"{SCHEMA['text_field'].help} (default: {SCHEMA['text_field'].default})",
    )
    ev.add_argument(
        "--val-fraction",
        type=float,
        default=None,
        help="evaluate only the held-out split of --data",
    )
    ev.add_argument("--seq-len", type=int, default=128, metavar="N")
    ev.add_argument("--batch-size", type=int, default=16, metavar="N")
    ev.add_argument("--max-batches", type=int, default=None, metavar="N")
    ev.add_argument("--max-bytes", type=int, default=SCHEMA["max_bytes"].default, metavar="N")
    ev.add_argument("--seed", type=int, default=0, help="seed of the train/held-out split")
    ev.add_argument("--attention-implementation", metavar="KERNEL", default=None)
    ev.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_tokenizer_flag(ev)
    _add_mesh_flag(ev, default=None)

    conv = sub.add_parser(
        "convert",
        help="Hugging Face <-> zoo",
        description="Convert SRC to DST: a Hugging Face directory becomes a zoo run directory "
        "(checkpoint at step 0); a zoo run directory becomes a Hugging Face directory (LoRA "
        "adapters merged). The direction follows SRC.",
    )
    conv.add_argument("source", metavar="SRC")
    conv.add_argument("dest", metavar="DST")
    conv.add_argument(
        "--overwrite",
        action="store_true",
        help="replace DST if it is not empty (written beside it, then swapped in)",
    )
    _add_tokenizer_flag(conv)
    _add_mesh_flag(conv, default=None)

    comp = sub.add_parser(
        "compile",
        help="compile the train step for a TPU topology you do not have: does it fit?",
        description="Lower and compile the real train step (forward, backward, optimizer "
        "update, with donation and shardings) for a TPU topology with libtpu's compile-only "
        "devices: no TPU and no weights needed. Takes the settings of `zoo train` and prints, "
        "per device, argument, output, temporary and peak bytes against the chip's HBM. Exit "
        "0: it fits; 3: it does not; 2: a usage error.",
    )
    comp.add_argument(
        "--topology",
        required=True,
        metavar="TOPOLOGY",
        help="TPU topology, e.g. v5e:2x2, v5e:2x4, v5p:2x2x1, v6e:2x2, v4:2x2x1",
    )
    comp.add_argument(
        "--json", dest="json_file", metavar="FILE", help="also write the figures as JSON"
    )
    comp.add_argument(
        "--max-batch",
        action="store_true",
        help="find the largest global batch that fits (bisection on compiles)",
    )
    _add_run_flags(comp, finetune=False)

    prof = sub.add_parser(
        "profile",
        help="where the time of profiled train steps went",
        description="Read a trace captured by `zoo train --profile START:END` (give the run "
        "directory, its profile/ directory or a trace file) and print the time per step by "
        "category (attention by kernel and version, matmuls, other fused operations, host/idle "
        "gaps, evaluation and checkpoints) and the top operations. --compare BEFORE AFTER "
        "shows the change per category, e.g. across a kernel upgrade.",
    )
    prof.add_argument("source", nargs="?", metavar="RUN_OR_TRACE", help="run or trace directory")
    prof.add_argument(
        "--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="two runs or traces to compare"
    )
    prof.add_argument("--json", action="store_true", help="print the figures as JSON")
    prof.add_argument(
        "--top", type=int, default=10, metavar="N", help="operations listed (default: 10)"
    )

    sub.add_parser("models", help="list the model presets", description="List the model presets.")

    kern = sub.add_parser(
        "kernels",
        help="list attention kernels, or verify one",
        description="List installed attention kernels (version, contract, platforms, whether they "
        "serve here); `zoo kernels verify NAME` runs the conformance suite against NAME here.",
    )
    kern.add_argument(
        "action", nargs="?", choices=["verify"], help="verify: run the conformance suite"
    )
    kern.add_argument("name", nargs="?", help="kernel name, e.g. xla, chunked, flash_tpu")
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    if args.command in ("train", "finetune", "compile"):
        given = {k: v for k, v in vars(args).items() if k in SCHEMA or k == "mesh"}
        if args.command == "finetune" and "model" in given:  # even the default preset's name
            from ._cli_train import finetune_model_error

            raise finetune_model_error()
        settings = resolve_settings(
            command=args.command,
            config_file=args.config,
            assignments=args.assignments,
            flags=given,
        )
        if args.command == "compile":
            from ._cli_compile import run_compile

            return run_compile(settings, args)
        from ._cli_train import join_processes, run_training
        from ._stop import stop_requests

        join_processes(args, settings)
        with stop_requests():  # from here on, SIGTERM/Ctrl-C stop after a step, with a save
            return run_training(settings, command=args.command)
    if args.command == "generate":
        from ._cli_use import cmd_generate

        return cmd_generate(args)
    if args.command == "eval":
        from ._cli_use import cmd_eval

        return cmd_eval(args)
    if args.command == "convert":
        from ._cli_use import cmd_convert

        return cmd_convert(args)
    if args.command == "profile":
        from ._cli_profile import cmd_profile

        return cmd_profile(args)
    if args.command == "models":
        from ._cli_catalog import cmd_models

        return cmd_models(args)
    from ._cli_catalog import cmd_kernels

    return cmd_kernels(args)


def _user_errors() -> tuple[type[BaseException], ...]:
    # Errors a user causes: bad settings, bad data, an incompatible checkpoint directory.
    errors: list[type[BaseException]] = [ValueError, FileNotFoundError, NotADirectoryError]
    from ._errors import CheckpointWriteError, NoUsableCheckpointError, RunLockedError

    errors += [NoUsableCheckpointError, RunLockedError, CheckpointWriteError]
    if "zoo_attention" in sys.modules:
        errors.append(sys.modules["zoo_attention"].KernelUnavailableError)
    return tuple(errors)


def _one_sentence(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if text.endswith((".", "?", "!")) else text + "."


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``zoo`` console script; returns the exit code.

    Exit codes: 0 success, 1 a failed check (``zoo kernels verify``) or a run stopped by a
    non-finite loss, 2 a usage error (one sentence on stderr, no traceback; ``ZOO_DEBUG=1``
    shows the traceback of a ``ValueError`` instead), 3 a train step that does not fit the
    topology (``zoo compile``).
    """
    cap_malloc_arenas()  # before any thread allocates: flat host memory over long runs
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the command's own parser, so the hint names its --help
        args._commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    # Orbax logs through absl, warning on every save without an eval metric, and logs each
    # failed write with its traceback from every thread it passed through: the error this
    # command reports says it in one sentence (ZOO_DEBUG=1 shows them).
    logging.getLogger("absl").setLevel(logging.ERROR if os.environ.get("ZOO_DEBUG") else 100)
    try:
        code = _run(args)
    except BaseException:
        if _joined():
            # Most likely another process died under a collective: the watchdog names it and
            # ends this process. Otherwise a crash: the traceback, then leave at once.
            from .parallel import await_verdict

            await_verdict()
            import traceback

            traceback.print_exc()
            _leave_processes(1)
        raise
    _leave_processes(code)
    return code


def _joined() -> bool:
    if "jax" not in sys.modules:
        return False
    import jax

    return jax.distributed.is_initialized()


def _leave_processes(code: int) -> None:
    """End a multi-process run: together on success; at once on failure, so the others'
    watchdogs notice instead of everyone waiting for a process that will never come."""
    if not _joined():
        return
    from .parallel import abandon_processes, stop_processes

    if code == 0:
        stop_processes()
        return
    abandon_processes()
    os._exit(code)


def _run(args: argparse.Namespace) -> int:
    def where() -> str:
        return f"{PROG} {args.command}"

    try:
        return _dispatch(args)
    except UsageError as err:
        print(f"{where()}: error: {_one_sentence(err)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `zoo models | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{where()}: interrupted.", file=sys.stderr)
        return 130
    except Exception as err:
        from ._errors import NonFiniteLossError, StoppedBySignalError

        if isinstance(err, NonFiniteLossError):
            print(f"{where()}: {_one_sentence(err)}", file=sys.stderr)
            return 1
        if isinstance(err, StoppedBySignalError):
            print(f"{where()}: {_one_sentence(err)}", file=sys.stderr)
            return 128 + err.signum  # 130 for SIGINT, 143 for SIGTERM, as a shell reports them
        if isinstance(err, _user_errors()) and not os.environ.get("ZOO_DEBUG"):
            print(f"{where()}: error: {_one_sentence(err)}", file=sys.stderr)
            return 2
        if _storage_error(err) and not os.environ.get("ZOO_DEBUG"):
            print(f"{where()}: error: {_storage_sentence(err)}", file=sys.stderr)
            return 2
        raise


# A full disk or quota, a read-only filesystem, missing permissions: the user's to fix.
_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


def _storage_error(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in _STORAGE_ERRNOS


def _storage_sentence(err: OSError) -> str:
    where = f" {err.filename}" if err.filename else ""
    return (
        f"Cannot write{where}: {(err.strerror or str(err)).lower()}; free space or choose a "
        "writable output directory (committed checkpoints are intact)."
    )


if __name__ == "__main__":
    sys.exit(main())
