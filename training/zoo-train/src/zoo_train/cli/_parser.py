"""zoo: train, fine-tune, sample, evaluate and convert zoo language models.

Commands (zoo COMMAND --help for each):

  zoo train                       train a model (default: a small byte-level Llama on the stdlib)
  zoo finetune --from-hf DIR      fine-tune a Hugging Face or zoo model, fully or with LoRA
  zoo generate RUN_OR_HF_DIR      sample text
  zoo eval RUN_OR_HF_DIR          held-out loss and perplexity
  zoo convert SRC DST             Hugging Face directory <-> zoo run directory
  zoo compile --topology v5e:2x2  compile the train step for a TPU topology: does it fit?
  zoo profile RUN                 where the time of `zoo train --profile A:B` steps went
  zoo data prepare SRC... --out S tokenize data once into a token store (zoo data info S)
  zoo metrics RUN --to wandb      replay a run's metrics into TensorBoard or W&B
  zoo models                      the model presets
  zoo kernels [verify NAME]       installed attention kernels / run the conformance suite
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib import metadata
from typing import NoReturn

from ._commands import COMMANDS

PROG = "zoo"


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        message = message[0].upper() + message[1:] if message else "Bad arguments"
        self.exit(2, f"{self.prog}: error: {message.rstrip('.')}; see `{self.prog} --help`.\n")


def _versions() -> str:
    """``zoo --version``: every installed zoo distribution and its version."""
    names = sorted(
        {
            d.metadata["Name"]
            for d in metadata.distributions()
            if (d.metadata["Name"] or "").lower().startswith("zoo-")
        },
        key=str.lower,
    )
    return "\n".join(f"{n} {metadata.version(n)}" for n in names)


class _Versions(argparse.Action):
    """``--version``: reads the installed distributions only when given (every run paid it)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(_versions())
        parser.exit()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``zoo`` argument parser: a sub-command per entry of the command table.

    With ``argv``, only the command it names gets its arguments (and its module imported):
    the others are listed by name and help, which is all ``zoo --help`` shows. Without, every
    command gets its arguments.
    """
    named = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    parser = _Parser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action=_Versions,
        help="print the version of every installed zoo package",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parser.set_defaults(_commands=sub.choices)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description)
        if argv is None or command.name == named:
            command.add_arguments(p)
        p.set_defaults(_command=command)
    return parser
